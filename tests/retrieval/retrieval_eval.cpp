#include "tests/retrieval/retrieval_eval.h"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/slide/png_io.h"
#include "common/stage/layout.h"
#include "common/store/slide_vectors.h"
#include "common/store/slide_features.h"
#include "stages/aggregate/aggregate.h"
#include "tests/synthslide/tissue_classes.h"

namespace tessera::retrieval {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs `command` in a shell; returns its standard output. Throws Error with the output (standard
// error included) when it exits non-zero.
std::string run(const std::string& command) {
  const std::string log = (fs::temp_directory_path() /
                           fmt::format("tessera_retrieval_{}.err", ::getpid()))
                              .string();
  FILE* pipe = ::popen(("(" + command + ") 2>" + log).c_str(), "r");
  if (pipe == nullptr) fail<Error>("cannot run '{}'", command);
  std::string out;
  char buffer[65536];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != 0) {
    std::string err;
    if (FILE* f = std::fopen(log.c_str(), "r")) {
      while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) err.append(buffer, n);
      std::fclose(f);
    }
    fs::remove(log);
    fail<Error>("'{}' failed (status {}):\n{}{}", command, status, out, err);
  }
  fs::remove(log);
  return out;
}

std::string q(const std::string& s) { return "'" + s + "'"; }

struct Slide {
  std::string id, patient, diagnosis;
  Image8 classes;
  int mask_downsample = 32;
  int class_at(int64_t x, int64_t y) const {
    const int64_t i = std::clamp<int64_t>(x / mask_downsample, 0, classes.width - 1);
    const int64_t j = std::clamp<int64_t>(y / mask_downsample, 0, classes.height - 1);
    return classes.pixels[static_cast<size_t>(j * classes.width + i)];
  }
};

// Slide-level scores of rankings: one query per slide, labels of the ranked slides.
struct Ranking {
  std::string truth;
  std::vector<std::string> labels;  // best first
  double chance = 0;                // share of eligible slides with the query's label
};

nlohmann::json score_rankings(const std::vector<Ranking>& rankings, int k, double seconds) {
  double top1 = 0, topk = 0, map = 0, chance = 0;
  for (const auto& r : rankings) {
    top1 += majority_vote_correct(r.labels, r.truth, 1);
    topk += majority_vote_correct(r.labels, r.truth, k);
    std::vector<bool> relevant;
    for (const auto& l : r.labels) relevant.push_back(l == r.truth);
    map += average_precision_at_k(relevant, k);
    chance += r.chance;
  }
  const double n = std::max<size_t>(rankings.size(), 1);
  return {{"queries", rankings.size()},
          {"top1_accuracy", top1 / n},
          {fmt::format("top{}_majority_accuracy", k), topk / n},
          {fmt::format("map_at_{}", k), map / n},
          {"chance_top1", chance / n},
          {"seconds", seconds}};
}

}  // namespace

bool majority_vote_correct(const std::vector<std::string>& ranked, const std::string& truth,
                           int k) {
  const size_t n = std::min<size_t>(ranked.size(), static_cast<size_t>(std::max(k, 0)));
  if (n == 0) return false;
  std::map<std::string, int> count;
  for (size_t i = 0; i < n; ++i) ++count[ranked[i]];
  std::string best = ranked[0];
  for (size_t i = 0; i < n; ++i) {
    if (count[ranked[i]] > count[best]) best = ranked[i];
  }
  return best == truth;
}

double average_precision_at_k(const std::vector<bool>& relevant, int k) {
  double hits = 0, sum = 0;
  for (size_t i = 0; i < relevant.size() && static_cast<int>(i) < k; ++i) {
    if (!relevant[i]) continue;
    hits += 1;
    sum += hits / static_cast<double>(i + 1);
  }
  return hits > 0 ? sum / hits : 0.0;
}

std::string slide_cohort_file(const std::string& run_dir, const std::string& name) {
  return (fs::path(RunLayout(run_dir).stage_root(kAggregateStage, name)) /
          cohort_file_name("slide"))
      .string();
}

std::string Executables::mpirun_for(int ranks) const {
  return fmt::format("{} -np {} ", mpirun, ranks);
}

nlohmann::json evaluate(const ChainSpec& spec, const Executables& exes) {
  const fs::path dir(spec.dir);
  synth::CohortSpec cohort_spec = spec.cohort;
  cohort_spec.dir = (dir / "cohort").string();
  const auto t_cohort = Clock::now();
  const std::vector<synth::CohortSlide> plan = synth::plan_cohort(cohort_spec);
  // The cohort is written once per dir; a dir made for another cohort is refused, not mixed.
  const nlohmann::json made_for = {
      {"slides", cohort_spec.slides}, {"patients", cohort_spec.patients},
      {"width", cohort_spec.width},   {"height", cohort_spec.height},
      {"seed", cohort_spec.seed},     {"regions", cohort_spec.regions},
      {"dominant", cohort_spec.dominant}};
  const std::string spec_file = (dir / "cohort" / "cohort.json").string();
  if (!fs::exists(dir / "cohort" / "truth.csv")) {
    synth::write_cohort(cohort_spec);
    atomic_write_file(spec_file, made_for.dump() + "\n");
  } else if (const auto found = read_json_file(spec_file); !found || *found != made_for) {
    fail<InvalidInput>("'{}' holds a cohort made with other parameters ({}, not {}): use another "
                       "directory",
                       dir.string(), found ? found->dump() : "unknown", made_for.dump());
  }
  const double cohort_s = seconds_since(t_cohort);
  std::map<std::string, Slide> slides;
  for (const auto& c : plan) {
    Slide s;
    s.id = c.slide_id;
    s.patient = c.patient_id;
    s.diagnosis = synth::tissue_class_name(c.diagnosis);
    s.classes = read_png((dir / "cohort" / c.class_mask).string());
    s.mask_downsample = cohort_spec.mask_downsample;
    slides.emplace(s.id, std::move(s));
  }

  // The chain; stages whose outputs are complete return at once.
  const std::string run_dir = (dir / "run").string();
  const RunLayout layout(run_dir);
  const std::string& m = spec.model;
  const std::string slide_index = "mean-" + m;
  const auto t_chain = Clock::now();
  nlohmann::json chain = nlohmann::json::object();
  const auto step = [&](const std::string& name, const std::string& command) {
    const auto t0 = Clock::now();
    run(command);
    chain[name] = seconds_since(t0);
  };
  step("patchgen", exes.mpirun_for(spec.ranks) + exes.patchgen + " --manifest " +
                       q((dir / "cohort" / "manifest.csv").string()) + " --out " + q(run_dir) +
                       " || test $? -eq 3");
  step("embed", exes.mpirun_for(spec.ranks) + exes.embed + " --run " + q(run_dir) + " --model " +
                    m + " --batch-size 16 --torch-threads 1");
  step("ingest", exes.mpirun_for(spec.ranks) + exes.ingest + " --run " + q(run_dir) + " --tag " +
                     m + " --normalize");
  step("aggregate", exes.mpirun_for(spec.ranks) + exes.aggregate + " --run " + q(run_dir) +
                        " --tag " + m);
  step("ingest_slides", exes.ingest + " --run " + q(run_dir) + " --level slide --slides " +
                            slide_index + " --normalize");
  const double chain_s = seconds_since(t_chain);

  // Patch mode: queries of every class, sampled evenly over the cohort's patches of that class.
  const std::string embed_dir = layout.stage_root(kEmbedStage, m);
  struct PatchQuery {
    std::string patient;
    int tissue_class = 0;
  };
  std::vector<PatchQuery> queries;
  std::vector<float> vectors;
  std::map<std::string, int64_t> patches_of_patient;
  std::map<std::string, std::map<int, int64_t>> class_patches;  // patient -> class -> patches
  int dim = 0;
  int64_t patch_size_level0 = 0;
  {
    std::map<int, std::vector<std::pair<std::string, int64_t>>> by_class;
    std::map<std::string, SlideFeatures> features;
    for (const auto& [id, slide] : slides) {
      const std::string path = embed_dir + "/features/" + id + ".h5";
      if (!fs::exists(path)) continue;
      SlideFeatures f = read_slide_features(path);
      dim = f.dim;
      patch_size_level0 = f.attributes.patch_size_level0;
      patches_of_patient[slide.patient] += f.rows;
      for (int64_t r = 0; r < f.rows; ++r) {
        const int c = slide.class_at(f.coords[2 * r] + patch_size_level0 / 2,
                                     f.coords[2 * r + 1] + patch_size_level0 / 2);
        ++class_patches[slide.patient][c];
        if (c > 0) by_class[c].emplace_back(id, r);
      }
      features.emplace(id, std::move(f));
    }
    for (auto& [c, list] : by_class) {
      const size_t take = std::min<size_t>(list.size(), spec.patch_queries_per_class);
      for (size_t t = 0; t < take; ++t) {
        const auto& [id, r] = list[t * list.size() / take];
        const auto& f = features.at(id);
        vectors.insert(vectors.end(), f.features.begin() + r * f.dim,
                       f.features.begin() + (r + 1) * f.dim);
        queries.push_back({slides.at(id).patient, c});
      }
    }
  }
  nlohmann::json patch_mode;
  {
    fs::create_directories(dir / "queries");
    const std::string qfile = (dir / "queries" / (m + ".h5")).string();
    {
      h5::File f = h5::File::open(qfile, h5::Mode::kCreateTruncate);
      f.write_dataset("vectors", h5::Type::kFloat32,
                      {queries.size(), static_cast<hsize_t>(dim)}, vectors.data());
      f.close();
    }
    int64_t most = 0, total = 0;
    for (const auto& [p, n] : patches_of_patient) most = std::max(most, n), total += n;
    const int64_t k = std::min<int64_t>(total, most + 10);
    const auto t0 = Clock::now();
    const nlohmann::json j = nlohmann::json::parse(
        run(exes.query + " --index " + q(layout.stage_root(kIngestStage, m)) + " --vectors " +
            q(qfile + ":/vectors") + " -k " + std::to_string(k) + " --format json"));
    const double seconds = seconds_since(t0);
    std::map<int, std::pair<double, int>> by_class;  // class -> (sum of precision, queries)
    // Chance of a query: the share of its class among the other patients' patches (what a
    // random hit would have).
    std::map<int, double> chance_sum;
    for (const auto& query : queries) {
      double same = 0, all = 0;
      for (const auto& [p, counts] : class_patches) {
        if (p == query.patient) continue;
        for (const auto& [c, n] : counts) {
          all += n;
          if (c == query.tissue_class) same += n;
        }
      }
      chance_sum[query.tissue_class] += all > 0 ? same / all : 0.0;
    }
    for (size_t i = 0; i < queries.size(); ++i) {
      int kept = 0, same = 0;
      for (const auto& h : j.at("queries").at(i).at("hits")) {
        if (h.at("patient_id").get<std::string>() == queries[i].patient) continue;
        const Slide& s = slides.at(h.at("slide_id").get<std::string>());
        same += s.class_at(h.at("x").get<int64_t>() + patch_size_level0 / 2,
                           h.at("y").get<int64_t>() + patch_size_level0 / 2) ==
                queries[i].tissue_class;
        if (++kept == 10) break;
      }
      auto& [sum, n] = by_class[queries[i].tissue_class];
      sum += kept > 0 ? static_cast<double>(same) / kept : 0.0;
      ++n;
    }
    nlohmann::json per_class = nlohmann::json::object();
    double macro = 0, macro_chance = 0;
    for (const auto& [c, v] : by_class) {
      per_class[synth::tissue_class_name(c)] = {{"precision_at_10", v.first / v.second},
                                                {"chance", chance_sum[c] / v.second},
                                                {"queries", v.second}};
      macro += v.first / v.second;
      macro_chance += chance_sum[c] / v.second;
    }
    const double classes = std::max<size_t>(by_class.size(), 1);
    patch_mode = {{"queries", queries.size()},
                  {"precision_at_10", macro / classes},
                  {"chance_precision_at_10", macro_chance / classes},
                  {"by_class", per_class},
                  {"seconds", seconds}};
  }

  // Slide-level modes over the slides that have a vector.
  const CohortVectors cohort = read_cohort_vectors(slide_cohort_file(run_dir, slide_index));
  const auto chance = [&](const std::string& id) {
    const Slide& s = slides.at(id);
    double eligible = 0, same = 0;
    for (const auto& other : cohort.ids) {
      const Slide& o = slides.at(other);
      if (o.patient == s.patient) continue;
      eligible += 1;
      same += o.diagnosis == s.diagnosis;
    }
    return eligible > 0 ? same / eligible : 0.0;
  };
  std::vector<Ranking> by_vector, by_mosaic;
  auto t0 = Clock::now();
  for (const auto& id : cohort.ids) {
    const nlohmann::json j = nlohmann::json::parse(
        run(exes.query + " --index " + q(layout.stage_root(kIngestStage, slide_index)) +
            " --similar-slide " + id + " --exclude-same-patient -k " + std::to_string(spec.k) +
            " --format json"));
    Ranking r{slides.at(id).diagnosis, {}, chance(id)};
    for (const auto& h : j.at("hits")) r.labels.push_back(h.at("diagnosis").get<std::string>());
    by_vector.push_back(std::move(r));
  }
  const double slide_s = seconds_since(t0);
  t0 = Clock::now();
  for (const auto& id : cohort.ids) {
    const nlohmann::json j = nlohmann::json::parse(
        run(exes.query + " --index " + q(layout.stage_root(kIngestStage, m)) + " --slide " + id +
            " --mosaic-vote --exclude-same-patient -k " + std::to_string(spec.k) +
            " --format json"));
    Ranking r{slides.at(id).diagnosis, {}, chance(id)};
    for (const auto& h : j.at("slides")) r.labels.push_back(h.at("diagnosis").get<std::string>());
    by_mosaic.push_back(std::move(r));
  }
  const double mosaic_s = seconds_since(t0);

  std::map<std::string, int> diagnoses;
  for (const auto& [id, s] : slides) ++diagnoses[s.diagnosis];
  return {{"model", m},
          {"cohort",
           {{"slides", plan.size()},
            {"patients", cohort_spec.patients},
            {"width", cohort_spec.width},
            {"height", cohort_spec.height},
            {"seed", cohort_spec.seed},
            {"diagnoses", diagnoses},
            {"slides_with_vectors", cohort.size()},
            {"write_s", cohort_s}}},
          {"chain_s", chain_s},
          {"chain", chain},
          {"modes",
           {{"patch", patch_mode},
            {"slide", score_rankings(by_vector, spec.k, slide_s)},
            {"mosaic", score_rankings(by_mosaic, spec.k, mosaic_s)}}}};
}

}  // namespace tessera::retrieval
