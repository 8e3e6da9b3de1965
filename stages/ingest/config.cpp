#include "stages/ingest/config.h"

#include <algorithm>
#include <map>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/options.h"

namespace tessera::ingest {

namespace {

constexpr OptionKind kResult = OptionKind::kResult;
constexpr OptionKind kRunControl = OptionKind::kRunControl;
constexpr OptionKind kDebug = OptionKind::kDebug;

void require(bool ok, const char* option, const std::string& why) {
  if (!ok) fail<InvalidInput>("invalid --{}: {}", option, why);
}

std::string part_list_text(const std::vector<int>& parts) {
  if (parts.empty()) return "all";
  std::string s;
  for (int p : parts) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

}  // namespace

OptionTable option_table() {
  OptionTable t;
  t.group("Input and output")
      ("run", kRunControl, po::value<std::string>()->required(),
       "run directory with a completed embed stage (RUN/embed/<tag>/, every part)")
      ("tag", kResult, po::value<std::string>()->default_value(""),
       "embed output to take in: RUN/embed/<tag> (default: the only tag under RUN/embed)")
      ("name", kResult, po::value<std::string>()->default_value(""),
       "output folder RUN/ingest/<name> (default: the tag), so one embed output can feed several "
       "indexes")
      ("embed-parts", kResult, po::value<std::string>()->default_value("all"),
       "embed parts to take in: all, or a list such as 0,2 or 0-3 (each must be complete)")
      ("level", kResult, po::value<std::string>()->default_value("patch"),
       "what to index: patch (embed's patch embeddings), or slide / patient (the vectors of an "
       "aggregate output, RUN/slides/<--slides>)")
      ("slides", kResult, po::value<std::string>()->default_value(""),
       "with --level slide|patient: the aggregate output RUN/slides/<name> (default: the only "
       "one of that level)")
      ("append", kRunControl, po::bool_switch(),
       "add the embed parts completed since the last ingest to its index, without rebuilding it")
      ("chunk-rows", kRunControl, po::value<int64_t>()->default_value(16384),
       "embeddings read and added at a time (bounds each rank's buffers)")
      ("threads", kRunControl, po::value<int>()->default_value(0),
       "FAISS threads per rank (0: the cores of the rank's CPU affinity)");
  t.group("Index")
      ("shards", kResult, po::value<int>()->default_value(1),
       "number of index shards K (independent of the number of ranks)")
      ("index", kResult, po::value<std::string>()->default_value("Flat"),
       "FAISS index_factory string: Flat, IVF1024,Flat, IVF1024,PQ48, HNSW32, ...")
      ("metric", kResult, po::value<std::string>()->default_value("ip"),
       "ip (inner product; cosine with --normalize) or l2")
      ("normalize", kResult, po::bool_switch(), "scale every vector to unit length")
      ("assign", kResult, po::value<std::string>()->default_value("by-slide"),
       "by-slide (all patches of a slide in one shard, shards balanced by rows) or cyclic "
       "(row i to shard i mod K)")
      ("train-size", kResult, po::value<int64_t>()->default_value(100000),
       "vectors sampled to train an index that needs training (IVF, PQ)")
      ("seed", kResult, po::value<uint64_t>()->default_value(0), "seed of the training sample");
  add_rerun_options(t, "replace an ingest output made with other settings (every generation)");
  add_fault_options(t, "vectors added");
  return t;
}

std::vector<int> parse_part_list(const std::string& text) {
  if (text == "all") return {};
  std::vector<int> parts;
  size_t pos = 0;
  auto bad = [&] {
    fail<InvalidInput>("invalid --embed-parts '{}': expected all, or part numbers such as 0,2 or "
                       "0-3",
                       text);
  };
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        const int p = std::stoi(item, &used);
        if (used != item.size() || p < 0) bad();
        parts.push_back(p);
      } else {
        size_t used2 = 0;
        const int a = std::stoi(item.substr(0, dash), &used);
        const int b = std::stoi(item.substr(dash + 1), &used2);
        if (used != dash || used2 != item.size() - dash - 1 || a < 0 || b < a || b - a > 100000) {
          bad();
        }
        for (int p = a; p <= b; ++p) parts.push_back(p);
      }
    } catch (const std::logic_error&) {
      bad();
    }
    pos = comma + 1;
  }
  std::sort(parts.begin(), parts.end());
  parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
  return parts;
}

Config config_from(const po::variables_map& v) {
  Config c;
  c.run = v["run"].as<std::string>();
  c.tag = v["tag"].as<std::string>();
  c.name = v["name"].as<std::string>();
  c.shards = v["shards"].as<int>();
  c.index = v["index"].as<std::string>();
  c.metric = v["metric"].as<std::string>();
  c.normalize = v["normalize"].as<bool>();
  c.assign = parse_assign(v["assign"].as<std::string>());
  c.train_size = v["train-size"].as<int64_t>();
  c.seed = v["seed"].as<uint64_t>();
  c.chunk_rows = v["chunk-rows"].as<int64_t>();
  c.threads = v["threads"].as<int>();
  c.embed_parts = parse_part_list(v["embed-parts"].as<std::string>());
  c.append = v["append"].as<bool>();
  c.level = v["level"].as<std::string>();
  c.slides = v["slides"].as<std::string>();
  require(c.level == "patch" || c.level == "slide" || c.level == "patient", "level",
          "expected patch, slide or patient");
  if (!c.slides.empty()) require_folder_name("slides", c.slides);
  require(c.level != "patch" || c.slides.empty(), "slides", "goes with --level slide|patient");
  require(c.level == "patch" || !c.append, "append", "is for --level patch only");
  c.stage = rerun_options_from(v);
  c.stage.faults = faults_from(v);
  if (!c.tag.empty()) require_folder_name("tag", c.tag);
  if (!c.name.empty()) require_folder_name("name", c.name);
  require(c.shards >= 1 && c.shards <= 65536, "shards", "must be 1..65536");
  require(!c.index.empty() && c.index.find_first_of(" \t\n#") == std::string::npos, "index",
          "expected a FAISS index_factory string without blanks, e.g. Flat or IVF1024,PQ48");
  require(c.metric == "ip" || c.metric == "l2", "metric", "expected ip or l2");
  require(c.train_size >= 1, "train-size", "must be >= 1");
  require(c.chunk_rows >= 1 && c.chunk_rows <= (int64_t{1} << 24), "chunk-rows",
          "must be 1..16777216");
  require(c.threads >= 0 && c.threads <= 1024, "threads", "must be 0..1024");
  require(!(c.append && c.stage.overwrite), "append", "cannot be combined with --overwrite");
  std::map<std::string, std::string> values = {
      {"run", c.run},
      {"tag", c.tag},
      {"name", c.name},
      {"embed-parts", part_list_text(c.embed_parts)},
      {"append", ini_value(false)},  // a property of one invocation, not of the output
      {"level", c.level},
      {"slides", c.slides},
      {"chunk-rows", ini_value(c.chunk_rows)},
      {"threads", ini_value(c.threads)},
      {"shards", ini_value(c.shards)},
      {"index", c.index},
      {"metric", c.metric},
      {"normalize", ini_value(c.normalize)},
      {"assign", to_string(c.assign)},
      {"train-size", ini_value(c.train_size)},
      {"seed", ini_value(c.seed)},
  };
  stage_option_values(c.stage, false, values);
  const OptionTable table = option_table();
  c.config_ini = table.config_ini(values);
  // The tag, name and parts enter the fingerprint as ingest resolves them (ingest.cpp), so that
  // equivalent spellings (the default tag spelt out, "all" or the list of every part) agree.
  std::map<std::string, std::string> fingerprinted = values;
  fingerprinted["tag"] = "";
  fingerprinted["name"] = "";
  fingerprinted["embed-parts"] = "all";
  c.fingerprint_ini = table.fingerprint_ini(fingerprinted);
  return c;
}

}  // namespace tessera::ingest
