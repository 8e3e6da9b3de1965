#include "stages/serve/config.h"

#include <arpa/inet.h>

#include "common/core/error.h"
#include "common/core/options.h"
#include "common/search/rerank.h"

namespace tessera::serve {

namespace {

constexpr OptionKind kRunControl = OptionKind::kRunControl;

void require(bool ok, const char* option, const std::string& why) {
  if (!ok) fail<InvalidInput>("invalid --{}: {}", option, why);
}

}  // namespace

bool is_loopback(const std::string& address) {
  if (address == "localhost" || address == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, address.c_str(), &a) != 1) return false;
  return (ntohl(a.s_addr) >> 24) == 127;
}

OptionTable option_table() {
  OptionTable t;
  t.group("Index")
      ("index", kRunControl, po::value<std::string>()->required(),
       "ingest output to serve: RUN/ingest/<name> (the folder of catalog.json)")
      ("mmap", kRunControl, value_with_default<bool>(true),
       "map index files into memory instead of reading them (IVF lists, flat codes)")
      ("slide-index", kRunControl, po::value<std::string>()->default_value("auto"),
       "slide- and patient-level indexes (ingest --level slide|patient) for similar slides and "
       "cases: auto (the siblings of --index made from its embed tag), none, or DIR[,DIR...]")
      ("rerank", kRunControl, po::value<int>()->default_value(search::kDefaultRerank),
       search::kRerankHelp)
      ("threads", kRunControl, po::value<int>()->default_value(0),
       "search threads per rank (0: the cores of its CPU affinity)")
      ("poll", kRunControl, po::value<double>()->default_value(10),
       "seconds between checks of catalog.json for a new generation (0: on SIGHUP only)");
  add_verify_option(t, "Index", VerifyLevel::kCheap,
                    "check shard files against the catalog at start and reload: cheap or full");
  t.group("HTTP")
      ("bind", kRunControl, po::value<std::string>()->default_value("127.0.0.1"),
       "address to listen on; anything but loopback needs --token-file")
      ("port", kRunControl, po::value<int>()->default_value(8470), "TCP port (0: any free one)")
      ("token-file", kRunControl, po::value<std::string>()->default_value(""),
       "file holding the bearer token every request must carry (Authorization: Bearer T)")
      ("http-threads", kRunControl, po::value<int>()->default_value(64),
       "requests answered at once by rank 0 (a connection holds one only while its request, read "
       "whole, is answered)")
      ("tick-ms", kRunControl, po::value<double>()->default_value(0),
       "milliseconds rank 0 waits for more searches after the first before a round (0: none; "
       "searches that arrive while a round runs form the next one)")
      ("tile-cache-mb", kRunControl, po::value<int>()->default_value(256),
       "encoded DeepZoom tiles kept in memory (MiB)")
      ("web-dir", kRunControl, po::value<std::string>()->default_value(""),
       "folder of the web page (default: the one installed at build time)")
      ("registry", kRunControl, po::value<std::string>()->default_value(""),
       "folder where the running service registers itself for tessera-status (default: "
       "RUN/serve)");
  t.group("Limits")
      ("max-k", kRunControl, po::value<int>()->default_value(1000), "largest k of a search")
      ("max-body-kb", kRunControl, po::value<int>()->default_value(8192),
       "largest request body (KiB)")
      ("max-filter", kRunControl, po::value<int>()->default_value(4096),
       "longest filter expression (characters)")
      ("request-timeout", kRunControl, po::value<double>()->default_value(30),
       "seconds a search may wait for its round")
      ("header-timeout", kRunControl, po::value<double>()->default_value(10),
       "seconds a request's head may take from its first byte (408 after; a slow client never "
       "holds an HTTP thread while it sends)")
      ("max-connections", kRunControl, po::value<int>()->default_value(1000),
       "connections open at once; beyond, the one that has waited longest for its request is "
       "closed. Fixed: a head of 32 KiB and 100 headers (431), 4 ranges (416), 1000 requests "
       "per connection");
  return t;
}

Config config_from(const po::variables_map& v) {
  Config c;
  c.index = v["index"].as<std::string>();
  c.bind = v["bind"].as<std::string>();
  c.port = v["port"].as<int>();
  c.token_file = v["token-file"].as<std::string>();
  c.http_threads = v["http-threads"].as<int>();
  c.tick_ms = v["tick-ms"].as<double>();
  c.poll_s = v["poll"].as<double>();
  const int cache_mb = v["tile-cache-mb"].as<int>();
  c.threads = v["threads"].as<int>();
  c.mmap = v["mmap"].as<bool>();
  c.rerank = v["rerank"].as<int>();
  require(c.rerank >= 0 && c.rerank <= search::kMaxRerank, "rerank",
          fmt::format("must be 0..{}", search::kMaxRerank));
  c.web_dir = v["web-dir"].as<std::string>();
  c.slide_index = v["slide-index"].as<std::string>();
  require(!c.slide_index.empty(), "slide-index", "give auto, none or DIR[,DIR...]");
  c.registry_dir = v["registry"].as<std::string>();
  c.verify = verify_from(v);
  c.limits.max_k = v["max-k"].as<int>();
  const int body_kb = v["max-body-kb"].as<int>();
  const int filter = v["max-filter"].as<int>();
  c.limits.request_timeout_s = v["request-timeout"].as<double>();
  c.limits.header_timeout_s = v["header-timeout"].as<double>();
  c.limits.max_connections = v["max-connections"].as<int>();
  require(c.port >= 0 && c.port <= 65535, "port", "must be 0..65535");
  require(c.http_threads >= 1 && c.http_threads <= 1024, "http-threads", "must be 1..1024");
  require(c.tick_ms >= 0 && c.tick_ms <= 1000, "tick-ms", "must be 0..1000");
  require(c.poll_s >= 0, "poll", "must be >= 0");
  require(cache_mb >= 1 && cache_mb <= 65536, "tile-cache-mb", "must be 1..65536");
  require(c.threads >= 0 && c.threads <= 1024, "threads", "must be 0..1024");
  require(c.limits.max_k >= 1 && c.limits.max_k <= 100000, "max-k", "must be 1..100000");
  require(body_kb >= 1 && body_kb <= 1 << 20, "max-body-kb", "must be 1..1048576");
  require(filter >= 1 && filter <= 1 << 20, "max-filter", "must be 1..1048576");
  require(c.limits.request_timeout_s > 0, "request-timeout", "must be > 0");
  require(c.limits.header_timeout_s > 0 && c.limits.header_timeout_s <= 3600, "header-timeout",
          "must be in (0, 3600]");
  require(c.limits.max_connections >= 1 && c.limits.max_connections <= 100000, "max-connections",
          "must be 1..100000");
  require(is_loopback(c.bind) || !c.token_file.empty(), "bind",
          "'" + c.bind + "' is not a loopback address: give --token-file so that only holders "
          "of the token can search");
  c.tile_cache_bytes = static_cast<size_t>(cache_mb) << 20;
  c.limits.max_body_bytes = static_cast<size_t>(body_kb) << 10;
  c.limits.max_filter_chars = static_cast<size_t>(filter);
  return c;
}

}  // namespace tessera::serve
