#include "stages/query/config.h"

#include "common/core/error.h"
#include "common/core/options.h"
#include "common/search/rerank.h"

namespace tessera::query {

namespace {

constexpr OptionKind kRunControl = OptionKind::kRunControl;

void require(bool ok, const char* option, const std::string& why) {
  if (!ok) fail<InvalidInput>("invalid --{}: {}", option, why);
}

}  // namespace

OptionTable option_table() {
  OptionTable t;
  t.group("Index")
      ("index", kRunControl, po::value<std::string>()->required(),
       "ingest output to search: RUN/ingest/<tag> (the folder of catalog.json)")
      ("mmap", kRunControl, value_with_default<bool>(true),
       "map index files into memory instead of reading them (IVF lists, flat codes)")
      ("rerank", kRunControl, po::value<int>()->default_value(search::kDefaultRerank),
       search::kRerankHelp)
      ("threads", kRunControl, po::value<int>()->default_value(0),
       "search threads per process (0: the cores of its CPU affinity)");
  add_verify_option(t, "Index", VerifyLevel::kFull,
                    "check the shard files this process loads against the catalog: full (the XXH3 "
                    "of every byte, once per load) or cheap (sizes and file ends only: damage "
                    "inside a file is served)");
  t.group("Query (exactly one source)")
      ("patch", kRunControl, po::value<int64_t>(), "a stored patch, by patch id")
      ("slide", kRunControl, po::value<std::string>(),
       "with --x and --y: the stored patch of this slide nearest a level-0 point")
      ("similar-slide", kRunControl, po::value<std::string>(),
       "the slides nearest this slide's vector (--index: an ingest --level slide output)")
      ("similar-patient", kRunControl, po::value<std::string>(),
       "the patients nearest this patient's vector (--index: an ingest --level patient output)")
      ("mosaic-vote", kRunControl, po::bool_switch(),
       "with --slide S (no --x --y): search a mosaic of S's patches and rank slides and patients "
       "by votes (Yottixel)")
      ("mosaic-percent", kRunControl, po::value<double>()->default_value(5.0),
       "mosaic size: this share of the slide's patches (at least --mosaic-min)")
      ("mosaic-min", kRunControl, po::value<int>()->default_value(8),
       "smallest mosaic (or every patch of a smaller slide)")
      ("x", kRunControl, po::value<int64_t>(), "level-0 x of the point (with --slide)")
      ("y", kRunControl, po::value<int64_t>(), "level-0 y of the point (with --slide)")
      ("vectors", kRunControl, po::value<std::string>(),
       "query vectors [Q, D] float32/float64: FILE.npy, FILE.h5 or FILE.h5:/dataset")
      ("image", kRunControl, po::value<std::string>(),
       "a patch image (PNG or JPEG), embedded with the model recorded in the catalog")
      ("device", kRunControl, po::value<std::string>()->default_value("cpu"),
       "where --image's model runs: cpu or cuda");
  t.group("Search")
      ("k,k", kRunControl, po::value<int>()->default_value(10), "neighbours per query")
      ("nprobe", kRunControl, po::value<int>()->default_value(0),
       "IVF lists probed (0: the catalog's default)")
      ("ef-search", kRunControl, po::value<int>()->default_value(0),
       "HNSW candidate list size (0: FAISS's default)")
      ("filter", kRunControl, po::value<std::string>()->default_value(""),
       "metadata expression applied inside the search, e.g. \"patient_id != P01 and site = "
       "lung\", \"slide_id in (a, b)\", \"tissue >= 0.5\"")
      ("exclude-same-slide", kRunControl, po::bool_switch(),
       "leave out patches of the query's slide")
      ("exclude-same-patient", kRunControl, po::bool_switch(),
       "leave out patches of the query's patient")
      ("batch-size", kRunControl, po::value<int>()->default_value(0),
       "queries searched per round, whose results are written before the next round (0: as "
       "many as keep queries x k within 65536 hits; 1 gives each query's own latency)");
  t.group("Output")
      ("format", kRunControl, po::value<std::string>()->default_value("table"),
       "table, csv or json")
      ("output", kRunControl, po::value<std::string>()->default_value(""),
       "write the results to this file instead of standard output")
      ("mosaic", kRunControl, po::value<std::string>()->default_value(""),
       "PNG of the query patch and its hits (with several queries: one file per query, "
       "OUT-qNNNNN.png)");
  return t;
}

Config config_from(const po::variables_map& v) {
  Config c;
  c.index = v["index"].as<std::string>();
  int sources = 0;
  if (v.count("patch")) {
    c.patch = v["patch"].as<int64_t>();
    ++sources;
  }
  c.mosaic_vote = v["mosaic-vote"].as<bool>();
  c.mosaic_percent = v["mosaic-percent"].as<double>();
  c.mosaic_min = v["mosaic-min"].as<int>();
  require(c.mosaic_percent > 0 && c.mosaic_percent <= 100, "mosaic-percent", "must be in (0, 100]");
  require(c.mosaic_min >= 1 && c.mosaic_min <= 256, "mosaic-min", "must be 1..256");
  if (v.count("similar-slide")) {
    c.similar_slide = v["similar-slide"].as<std::string>();
    ++sources;
  }
  if (v.count("similar-patient")) {
    c.similar_patient = v["similar-patient"].as<std::string>();
    ++sources;
  }
  if (v.count("slide") && c.mosaic_vote) {
    c.slide = v["slide"].as<std::string>();
    require(!v.count("x") && !v.count("y"), "mosaic-vote", "takes the whole slide: no --x --y");
    ++sources;
  } else if (v.count("slide")) {
    c.slide = v["slide"].as<std::string>();
    require(v.count("x") && v.count("y"), "slide", "needs --x and --y (a level-0 point)");
    c.x = v["x"].as<int64_t>();
    c.y = v["y"].as<int64_t>();
    ++sources;
  } else {
    require(!c.mosaic_vote, "mosaic-vote", "needs --slide S");
    require(!v.count("x") && !v.count("y"), "x", "--x and --y go with --slide");
  }
  if (v.count("vectors")) {
    c.vectors = v["vectors"].as<std::string>();
    ++sources;
  }
  if (v.count("image")) {
    c.image = v["image"].as<std::string>();
    ++sources;
  }
  if (sources != 1) {
    fail<InvalidInput>("{}: give exactly one of --patch ID, --slide S with --x X --y Y, --slide S "
                       "with --mosaic-vote, --similar-slide S, --similar-patient P, --vectors F "
                       "or --image F",
                       sources == 0 ? "no query given" : fmt::format("{} queries given", sources));
  }
  c.k = v["k"].as<int>();
  c.nprobe = v["nprobe"].as<int>();
  c.ef_search = v["ef-search"].as<int>();
  c.filter = v["filter"].as<std::string>();
  c.exclude_same_slide = v["exclude-same-slide"].as<bool>();
  c.exclude_same_patient = v["exclude-same-patient"].as<bool>();
  c.format = v["format"].as<std::string>();
  c.output = v["output"].as<std::string>();
  c.mosaic = v["mosaic"].as<std::string>();
  c.batch_size = v["batch-size"].as<int>();
  c.threads = v["threads"].as<int>();
  c.mmap = v["mmap"].as<bool>();
  c.rerank = v["rerank"].as<int>();
  require(c.rerank >= 0 && c.rerank <= search::kMaxRerank, "rerank",
          fmt::format("must be 0..{}", search::kMaxRerank));
  c.device = v["device"].as<std::string>();
  c.verify = verify_from(v);
  require(c.k >= 1 && c.k <= 100000, "k", "must be 1..100000");
  require(c.nprobe >= 0, "nprobe", "must be >= 0");
  require(c.ef_search >= 0, "ef-search", "must be >= 0");
  require(c.format == "table" || c.format == "csv" || c.format == "json", "format",
          "expected table, csv or json");
  require(c.batch_size >= 0, "batch-size", "must be >= 0");
  require(c.threads >= 0 && c.threads <= 1024, "threads", "must be 0..1024");
  require(c.device == "cpu" || c.device == "cuda", "device", "expected cpu or cuda");
  if (!c.similar_slide.empty() || !c.similar_patient.empty()) {
    // A slide- or patient-level search takes -k, --exclude-same-patient, --format and --output;
    // an option it would not apply is refused rather than dropped from the answer.
    const char* what = "does not apply to --similar-slide or --similar-patient";
    require(c.filter.empty(), "filter", what);
    require(!c.exclude_same_slide, "exclude-same-slide", what);
    require(c.mosaic.empty(), "mosaic", what);
    require(c.nprobe == 0, "nprobe", what);
    require(c.ef_search == 0, "ef-search", what);
  }
  return c;
}

}  // namespace tessera::query
