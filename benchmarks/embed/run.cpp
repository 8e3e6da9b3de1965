#include "benchmarks/embed/run.h"

#include <openslide/openslide.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/core/cpu.h"
#include "common/core/options.h"
#include "benchmarks/bench_report.h"
#include "common/core/csv.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/layout.h"
#include "common/stage/marker.h"
#include "common/mpi/mpi_main.h"
#include "stages/embed/config.h"
#include "stages/embed/infer.h"
#include "stages/embed/model.h"
#include "stages/embed/source.h"
#include "stages/embed/work.h"
#include "stages/patchgen/config.h"
#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "stages/patchgen/patchgen.h"
#include "tests/synthslide/synthslide.h"

#include "benchmarks/embed/report.h"

namespace tessera::embed::driver {

namespace fs = std::filesystem;
using bench::Stopwatch;
using nlohmann::json;

// Collective. Makes RUN/patchgen (default patchgen options) from the slide, generating the slide
// first, unless RUN/patchgen/_SUCCESS exists.
json ensure_run(const BenchOptions& o, Comm& comm) {
  const std::string success = stage_file(RunLayout(o.run).stage_root(kPatchgenStage), kSuccessFile);
  if (comm.broadcast(fs::exists(success) ? "1" : "0", 0) == "1") return {{"generated", false}};
  const std::string manifest = (fs::path(o.run) / "manifest.csv").string();
  json info = {{"generated", true}};
  if (comm.rank() == 0) {
    if (!fs::exists(o.slide)) {
      spdlog::info("generating {}x{} slide '{}' (seed {})", o.width, o.height, o.slide,
                   o.slide_seed);
      synth::SlideSpec spec;
      spec.path = o.slide;
      spec.width = o.width;
      spec.height = o.height;
      spec.seed = o.slide_seed;
      fs::create_directories(fs::path(o.slide).parent_path());
      Stopwatch watch;
      synth::write_slide(spec);
      info["slide_generate_s"] = watch.seconds();
    }
    fs::create_directories(o.run);
    atomic_write_file(manifest, csv_record({"slide_id", "path"}) + csv_record({"bench", o.slide}));
  }
  comm.barrier();
  po::options_description desc;
  patchgen::add_options(desc);
  add_common_options(desc);
  const patchgen::Config config =
      patchgen::config_from(parse_options(desc, {"--manifest", manifest, "--out", o.run,
                                                 "--chunk-patches",
                                                 std::to_string(o.chunk_patches)})
                                .values);
  Stopwatch watch;
  const int code = patchgen::run(config, comm);
  if (code != kExitOk) {
    fail<Error>("patchgen of '{}' into '{}' exited with code {}", o.slide, o.run, code);
  }
  info["patchgen_s"] = watch.seconds();
  return info;
}

// patchgen's chunk-patches of the run (from RUN/patchgen/config.ini); throws InvalidInput when
// it is not `expected`.
int run_chunk_patches(const std::string& run, int expected) {
  const std::string ini = stage_file(RunLayout(run).stage_root(kPatchgenStage), kConfigFile);
  std::istringstream lines(read_file(ini));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("chunk-patches", 0) != 0) continue;
    const int chunk = std::stoi(line.substr(line.find('=') + 1));
    if (chunk != expected) {
      fail<InvalidInput>("run '{}' was made with chunk-patches {}, not --chunk-patches {}: use "
                         "another --run",
                         run, chunk, expected);
    }
    return chunk;
  }
  fail<InvalidInput>("'{}' has no chunk-patches line", ini);
}

// The files a stage-path mode reads: the index, the shards and the slides.
std::vector<std::string> input_files(const IndexInfo& index) {
  std::vector<std::string> files = {index.path};
  for (int s = 0; s < index.num_shards; ++s) files.push_back(index.shard_path(s));
  for (const std::string& slide : index.slides.path) files.push_back(slide);
  return files;
}

PatchSet load_patch_set(const IndexInfo& index, const IndexReader& reader, int64_t total,
                        int batch_size, bool pad, Comm& comm) {
  PatchSet set;
  set.total = total;
  set.batch_size = batch_size;
  set.pad = pad;
  set.patch_size = index.patch_size;
  set.patch_bytes = static_cast<size_t>(index.patch_size) * index.patch_size * 3;
  const Partition partition = Partition::cyclic(total, comm.size());
  for (int64_t b = 0; b < batch_count(partition, comm.rank(), batch_size); ++b) {
    set.batches.push_back(batch_rows(partition, comm.rank(), batch_size, b));
    set.rows.insert(set.rows.end(), set.batches.back().begin(), set.batches.back().end());
  }
  set.pixels.assign(set.batches.size() * batch_size * set.patch_bytes, 0);
  StoreSource source(index);
  for (size_t b = 0; b < set.batches.size(); ++b) {
    source.read(reader.read_rows(set.batches[b]),
                set.pixels.data() + b * batch_size * set.patch_bytes);
  }
  return set;
}

// The real rows of a padded [batches * batch_size, d] output, in row order.
std::vector<float> real_rows(const PatchSet& set, const std::vector<float>& padded, int d) {
  std::vector<float> out;
  out.reserve(set.rows.size() * d);
  for (size_t b = 0; b < set.batches.size(); ++b) {
    const float* first = padded.data() + b * set.batch_size * static_cast<size_t>(d);
    out.insert(out.end(), first, first + set.batches[b].size() * d);
  }
  return out;
}

struct ModeRun {
  json metrics;
  std::vector<float> embeddings;  // this rank's, in row order
};

// Collective. Times `body` between barriers; adds resource usage deltas around it.
template <typename Body>
json timed(Comm& comm, int64_t total, Body&& body) {
  const json before = bench::resource_usage();
  bench::reset_peak_rss();
  comm.barrier();
  Stopwatch watch;
  body();
  comm.barrier();
  const double wall = watch.seconds();
  const json after = bench::resource_usage();
  const json rss = bench::peak_rss_mb_since_reset();
  const auto delta = [&](const char* key) {
    return after[key].get<double>() - before[key].get<double>();
  };
  return {{"seconds", wall},
          {"tiles_per_s", total / wall},
          {"peak_rss_mb", comm.allreduce_max(rss.is_number() ? rss.get<double>() : -1.0)},
          {"minor_page_faults",
           comm.allreduce_sum(static_cast<int64_t>(delta("minor_page_faults")))},
          {"major_page_faults",
           comm.allreduce_sum(static_cast<int64_t>(delta("major_page_faults")))},
          {"cpu_s_max_rank", comm.allreduce_max(delta("user_s") + delta("system_s"))},
          {"cpu_system_s_max_rank", comm.allreduce_max(delta("system_s"))}};
}

// Runs `body` on a new thread and waits for it. embed_rows runs forward on its own inference
// thread; so do model-only and cached, because a thread's OpenMP team and malloc arena change the
// speed: on the 2-core development machine, forward passes on the main thread took 7x more page
// faults and, under load, up to 10x longer (spinning OpenMP workers).
template <typename Body>
void on_new_thread(Body&& body) {
  std::exception_ptr error;
  std::thread thread([&] {
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
  });
  thread.join();
  if (error) std::rethrow_exception(error);
}

ModeRun model_only(const Model& model, const PatchSet& set,
                   const std::vector<PreparedBatch>& prepared, Comm& comm) {
  const int d = model.output_dim();
  std::vector<float> out(prepared.size() * set.batch_size * static_cast<size_t>(d));
  ModeRun r;
  r.metrics = timed(comm, set.total, [&] {
    on_new_thread([&] {
      for (size_t b = 0; b < prepared.size(); ++b) {
        model.forward(prepared[b], out.data() + b * set.batch_size * static_cast<size_t>(d));
      }
    });
  });
  r.embeddings = real_rows(set, out, d);
  return r;
}

ModeRun cached(const Model& model, const PatchSet& set, Comm& comm) {
  const int d = model.output_dim();
  std::vector<float> out(set.batches.size() * set.batch_size * static_cast<size_t>(d));
  ModeRun r;
  r.metrics = timed(comm, set.total, [&] {
    on_new_thread([&] {
      for (size_t b = 0; b < set.batches.size(); ++b) {
        const PreparedBatch input =
            model.prepare(set.batch_pixels(b), set.forward_rows(b), set.patch_size);
        model.forward(input, out.data() + b * set.batch_size * static_cast<size_t>(d));
      }
    });
  });
  r.embeddings = real_rows(set, out, d);
  return r;
}


// store or wsi: the stage's own loop into a scratch shard, read back (untimed) for the hash.
ModeRun stage_path(const std::string& kind, const Model& model, const Inputs& inputs,
                   const PatchSet& set, const Config& config, const std::string& scratch,
                   Comm& comm) {
  const std::string shard = (fs::path(scratch) / (kind + "-" + rank_file_name(comm.rank(), ".h5")))
                                .string();
  json cache = {{"policy", inputs.policy}};
  std::optional<IndexInfo> own_index;
  std::optional<IndexReader> own_reader;
  if (inputs.policy != bench::kCacheWarm) {
    if (inputs.policy == bench::kCacheDrop) {
      Stopwatch drop_watch;
      cache["dropped"] = bench::drop_page_cache(inputs.files);
      cache["drop_s"] = drop_watch.seconds();
    }
    Stopwatch open_watch;
    own_index.emplace(load_index_info(inputs.stage_dir));
    own_reader.emplace(own_index->path);
    cache["open_s"] = open_watch.seconds();
  }
  const IndexInfo& index = own_index ? *own_index : *inputs.index;
  const IndexReader& reader = own_reader ? *own_reader : *inputs.reader;
  InferStats stats;
  ModeRun r;
  r.metrics = timed(comm, set.total, [&] {
    auto source = make_source(kind, index);
    stats = embed_rows(index, reader, Partition::cyclic(set.total, comm.size()), comm.rank(),
                       model, *source, config, shard, "");
  });
  r.metrics["infer_rank0"] = json::parse(comm.broadcast(stats.to_json().dump(), 0));
  r.metrics["cache_rank0"] = json::parse(comm.broadcast(cache.dump(), 0));
  {
    const EmbeddingsReader file(shard);
    std::vector<int64_t> ids(static_cast<size_t>(file.rows()));
    file.read_ids(ids.data(), 0, file.rows());
    bool same = ids.size() == set.rows.size();
    const auto expected = reader.read_rows(set.rows).patch_id;
    for (size_t i = 0; same && i < ids.size(); ++i) same = ids[i] == expected[i];
    if (!same) fail<Error>("'{}' does not hold the benchmark's patch ids in order", shard);
    r.embeddings.resize(static_cast<size_t>(file.rows()) * file.dim());
    file.read_values(r.embeddings.data(), 0, file.rows());
  }
  fs::remove(shard);
  return r;
}

std::string sha256_floats(const std::vector<float>& values) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(values.data()),
                                     values.size() * sizeof(float)));
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double{a[i]} - double{b[i]}));
  return m;
}

// Collective. One repetition: every mode once, in kModes order rotated by `offset` so that no
// mode always runs first. `last` receives each mode's embeddings (this rank's).
json repetition(int index, size_t offset, const Context& c,
                std::map<std::string, std::vector<float>>* last) {
  c.comm.barrier();
  const bench::RepetitionProbe probe;
  const json load = bench::load_average();
  std::vector<std::string> order = kModes;
  std::rotate(order.begin(), order.begin() + static_cast<long>(offset % order.size()), order.end());
  json modes;
  for (const std::string& mode : order) {
    ModeRun r = mode == "model-only" ? model_only(c.model, c.set, c.prepared, c.comm)
                : mode == "cached"   ? cached(c.model, c.set, c.comm)
                                     : stage_path(mode, c.model, c.inputs, c.set, c.config,
                                                  c.scratch, c.comm);
    json hashes = json::array();
    for (const auto& h : c.comm.allgather(sha256_floats(r.embeddings))) hashes.push_back(h);
    r.metrics["embeddings_sha256"] = hashes;
    modes[mode] = std::move(r.metrics);
    (*last)[mode] = std::move(r.embeddings);
  }
  c.comm.barrier();
  json around = probe.finish();
  {
    // Each mode resets the peak-RSS mark: the repetition's peak is the largest of theirs.
    double peak = around["peak_rss_mb"].is_number() ? around["peak_rss_mb"].get<double>() : -1.0;
    for (const auto& m : modes) peak = std::max(peak, m["peak_rss_mb"].get<double>());
    around["peak_rss_mb"] = c.comm.allreduce_max(peak);
    around["minor_page_faults"] =
        c.comm.allreduce_sum(around["minor_page_faults"].get<int64_t>());
    around["major_page_faults"] =
        c.comm.allreduce_sum(around["major_page_faults"].get<int64_t>());
    around["pressure"] = json::parse(c.comm.broadcast(around["pressure"].dump(), 0));
  }
  const auto rate = [&](const char* mode) { return modes[mode]["tiles_per_s"].get<double>(); };
  const json efficiency =
      efficiencies(modes, "/tiles_per_s"_json_pointer, "/cpu_s_max_rank"_json_pointer);
  spdlog::info("repetition {}: tiles/s model-only {:.2f}, cached {:.2f}, store {:.2f}, wsi {:.2f}; "
               "store efficiency {:.3f}",
               index, rate("model-only"), rate("cached"), rate("store"), rate("wsi"),
               efficiency["store"].get<double>());
  return {{"index", index},  {"order", order},           {"load_average_at_start", load},
          {"modes", modes},  {"efficiency", efficiency}, {"around", around}};
}

}  // namespace tessera::embed::driver
