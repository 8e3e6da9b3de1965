// The run directory: the one owner of every path of a run and of the stage graph.
//
//   RUN/<folder>/                         a stage without names (patchgen)
//   RUN/<folder>/<name>/                  a named stage (embed's tag, aggregate's and ingest's name)
//   .../part-PPPPP-of-QQQQQ/              one part of P (P > 1); the root itself when P = 1
//   RUN/<folder>/<name>/gen-NNNNN/        a generation (ingest: every --append is a new one)
//
// A stage's folder is its name (patchgen, embed, ingest) except where the outputs read better
// under another: aggregate writes RUN/slides/<name>/.
//
// Every stage directory holds the files the skeleton owns (run.json, config.ini, _SUCCESS,
// _STALE, .lock, .ranks.lock, markers/rank-NNNNN.json). The stage graph (`stage_graph`) declares
// the stages in chain order and what each reads; stale marking, tessera-status and the launchers
// follow it. Adding a stage means adding one StageDecl here. Every function is pure or reads the
// file system only; none is collective.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// Stage names: the executable, the "stage" of run.json and markers, and (but for aggregate) the
// folder under RUN/.
inline constexpr const char* kPatchgenStage = "patchgen";
inline constexpr const char* kEmbedStage = "embed";
inline constexpr const char* kAggregateStage = "aggregate";  // its folder is "slides"
inline constexpr const char* kIngestStage = "ingest";

// Where running services register themselves, RUN/serve/<index name>.json (serve's registry.h);
// not a stage: nothing reads it but tessera-status.
inline constexpr const char* kServicesDir = "serve";

// Files of a stage directory the skeleton owns.
inline constexpr const char* kRunFile = "run.json";
inline constexpr const char* kConfigFile = "config.ini";
inline constexpr const char* kSuccessFile = "_SUCCESS";
inline constexpr const char* kStaleFile = "_STALE";  // outputs made from a replaced input
inline constexpr const char* kLockFile = ".lock";             // the writer's lock (rank 0)
inline constexpr const char* kRanksLockFile = ".ranks.lock";  // shared by every rank of a job
inline constexpr const char* kProgressFile = "progress.jsonl";
inline constexpr const char* kMarkerDir = "markers";

// How a stage's directories are laid out under RUN/<folder>/.
enum class DirKind {
  kParts,             // RUN/<stage>[/part-..]
  kNamedParts,        // RUN/<stage>/<name>[/part-..]
  kNamedGenerations,  // RUN/<stage>/<name>/gen-NNNNN
};

// How the launchers (launchers/chain.sh, launchers/submit) run a stage. They build every command
// from the declaration alone (see `StageDecl`), so a new stage needs no launcher of its own.
enum class Launch {
  kPerPart,    // once per cohort part, --part p --parts P (a Slurm job array: task p = part p)
  kOnce,       // once, after the stages it reads
  kWhenNamed,  // once, and only when the chain names it (--<stage> NAME)
};

struct StageDecl {
  std::string name;                // the stage: its executable, run.json's "stage"
  std::string folder;              // its folder under RUN/
  DirKind kind = DirKind::kParts;
  std::string name_option;         // the option that names its folder ("--tag", "--name")
  std::vector<std::string> reads;  // stages whose outputs it reads
  std::string run_option = "--run";  // the option that names the run directory
  Launch launch = Launch::kOnce;
  // Options of the chain the launchers pass on as they are ("--manifest", "--model").
  std::vector<std::string> chain_options;
  std::string threads_option;  // the option of threads per rank ("--threads"), if any
};

// Every stage, in chain order (a stage comes after every stage it reads).
const std::vector<StageDecl>& stage_graph();

// The declaration of `stage`; throws InvalidInput for an unknown stage.
const StageDecl& stage_decl(const std::string& stage);

// Every stage that reads `stage`'s outputs, directly or through others, in chain order.
std::vector<std::string> downstream_stages(const std::string& stage);

struct PartName {
  int part = 0;
  int parts = 1;
};

// "part-PPPPP-of-QQQQQ" and its exact inverse (nullopt for any other name, and for p >= q).
std::string part_name(int part, int parts);
std::optional<PartName> parse_part_name(std::string_view name);

// The directory of one part of a stage: `root` itself when parts == 1, else root/part_name.
std::string part_dir(const std::string& root, int part, int parts);

// "gen-NNNNN" and its exact inverse.
std::string generation_name(int generation);
std::optional<int> parse_generation_name(std::string_view name);
std::string generation_dir(const std::string& root, int generation);

// `stage_dir`/`file`.
std::string stage_file(const std::string& stage_dir, const char* file);

// One existing (or expected) stage directory of a run.
struct StageDir {
  std::string stage;
  std::string name;     // tag or name; empty for unnamed stages
  int part = 0;         // the generation for kNamedGenerations
  int parts = 1;        // 1 for generations
  std::string dir;
};

class RunLayout {
 public:
  // `run` is made absolute and normal, so paths built from it do not depend on the working
  // directory.
  explicit RunLayout(const std::string& run);

  const std::string& run() const { return run_; }

  // RUN/<folder> of a stage, which holds its names (or its parts, unnamed).
  std::string stage_base(const std::string& stage) const;
  // RUN/<folder> or RUN/<folder>/<name> (named stages need a name).
  std::string stage_root(const std::string& stage, const std::string& name = "") const;
  // The directory of part `part` of `parts` of a stage (with its name when named).
  std::string stage_dir(const std::string& stage, const std::string& name, int part,
                        int parts) const;

  // The names (tags, index names) under RUN/<folder>, sorted; empty for unnamed stages.
  std::vector<std::string> names(const std::string& stage) const;

  // Every stage directory of `stage` under the run: the root when it holds a stage, every part
  // folder, and for a split the parts of each split that do not exist yet (dir named but absent);
  // generations in order for kNamedGenerations (preceded by the name's root when the root is
  // itself a stage directory: ingest --level slide|patient). Sorted by name, then part.
  std::vector<StageDir> stage_dirs(const std::string& stage) const;
  // The same for one name of a named stage (or the unnamed stage with name "").
  std::vector<StageDir> stage_dirs(const std::string& stage, const std::string& name) const;

 private:
  std::string run_;
};

// The part directories below a stage root (see RunLayout::stage_dirs).
std::vector<PartName> parts_under(const std::string& root);

}  // namespace tessera
