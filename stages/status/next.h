// The commands tessera-status suggests: for each row that is not complete the command that
// completes it (`StageStatus::next`), and after the rows the stages due next. Commands are
// "mpirun -np W <stage> ..." with absolute paths, quoted for a POSIX shell where needed; each is
// run as printed by tests/e2e/recovery_e2e_test.cpp. Every function reads files only.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/status/state.h"

namespace tessera::status {

// `word` for a shell command line: as is when it holds only [A-Za-z0-9_./=:,+-] (and is not
// empty), else single-quoted ('\'' for a quote inside).
std::string shell_word(const std::string& word);

// `mpirun -np W <program> --config DIR/config.ini` + `extra` (each a shell word), or "" when
// `config_dir` has no config.ini or the world size is unknown.
std::string rerun_command(const std::string& program, const std::string& config_dir,
                          std::optional<int> world_size, const std::vector<std::string>& extra);

// Sets `s.next` for one part of a stage run as `program`: incomplete or stale, a rerun from its
// own config.ini; missing, a start from the config.ini of a sibling with the same number of parts
// plus --part/--parts. Nothing for a damaged run.json; `problem` says when no command can be made.
void set_part_next(StageStatus& s, const std::vector<StageStatus>& siblings,
                   const std::string& program);

// A stale directory starts afresh whatever its configuration, so its command may spell out what
// its config.ini may have left to defaults and that could resolve differently now (a second embed
// tag, a second aggregate output); an incomplete one resumes only with config.ini's values as
// they were given (the stages fingerprint them so), so its command adds nothing. For a stale row
// of a stage named by --name that records the embed tag it read (aggregate): appends "--tag T
// --name N" to `s.next`.
void spell_out_stale_names(StageStatus& s, const std::string& name_option);

// Sets `next` of every incomplete or stale generation of ingest index `name` made from embed tag
// `tag`: a rerun from its config.ini with --tag and --name spelt out (ingest fingerprints them as
// resolved), plus --append for generations after the first (an append resumes as one).
void set_generation_next(std::vector<StageStatus>& generations, const std::string& tag,
                         const std::string& name);

// Sets `next` of a slide- or patient-level index (state.h is_vector_index) that is not complete:
// incomplete, a rerun from its config.ini (the level, aggregate output and name as recorded);
// stale, the same with "--slides S --name N" spelt out (see spell_out_stale_names); complete
// without its slide_catalog.json, the rerun with --overwrite (a rerun alone would find the
// directory complete).
void set_vector_index_next(StageStatus& index);

// Keeps the `next` of a slide- or patient-level index only where the aggregate output it reads
// (its tag) is complete, or is itself rerun by an earlier `next` (chain order); otherwise the
// command would fail as printed, so it is dropped and `problem` says what is missing. `rows`: every
// row of the run.
void require_slide_vectors(std::vector<StageStatus>& rows);

// A row whose last attempt failed on invalid input (failure exit code 2) would fail the same way
// rerun from its config.ini: its `next` is dropped and `problem` says what to do instead (fix the
// options the failure names, and rerun with --overwrite, or remove the directory). Other
// failures (I/O, a killed rank) keep their rerun, which resumes. `rows`: every row of the run;
// call before require_slide_vectors, so that what depends on a dropped rerun is dropped too.
void drop_reruns_that_fail_alike(std::vector<StageStatus>& rows);

// Where a command names a stage's executable `executable`, seen from `self_dir`, the folder of the
// running tessera-status: `self_dir/../<executable>/<executable>` (a build tree's
// build/stages/<stage>/<stage> beside build/stages/status/) or `self_dir/<executable>` (one bin/
// folder), as an absolute path when that file exists and is executable; else the bare name (to be
// found on PATH). `self_dir` "" gives the bare name.
std::string program_path(const std::string& executable, const std::string& self_dir);

// `command` ("mpirun -np W <executable> ...", as this file builds them) with the executable named
// by program_path, so that it runs as printed from any directory; other text as it is.
std::string with_program_path(const std::string& command, const std::string& self_dir);

// The embed output of a tag as ingest suggestions need it.
struct EmbedTag {
  std::string tag;
  int parts = 0;              // its number of parts (0: none found)
  bool all_complete = false;  // every part complete, and rows in some
  std::optional<int> world_size;
};

// The generation of ingest index `name` (folder `root`) that is due when every generation found
// is complete and embed parts of its tag are not in catalog.json's "parts_in": a missing row
// whose next command is "ingest --config GEN0/config.ini --tag T --name N --append --embed-parts
// all". nullopt when nothing is due.
std::optional<StageStatus> due_generation(const std::string& root, const std::string& name,
                                          const std::string& tag,
                                          const std::vector<StageStatus>& generations,
                                          const nlohmann::json& catalog, const EmbedTag& embed);

// "mpirun -np W ingest --run RUN --tag T" for every tag of `tags` whose parts are all complete
// and that no index takes in (`ingested`: the tags of every ingest row); W = embed's world size.
std::vector<std::string> ingest_suggestions(const std::string& run,
                                            const std::map<std::string, EmbedTag>& tags,
                                            const std::set<std::string>& ingested);

// "mpirun -np 1 ingest --run RUN --level L --slides NAME" for every aggregate output among `rows`
// that is complete (exit code 0) and that no slide- or patient-level index takes in (`indexed`:
// the aggregate outputs taken in). One rank: the index is built by rank 0.
std::vector<std::string> vector_index_suggestions(const std::string& run,
                                                  const std::vector<StageStatus>& rows,
                                                  const std::set<std::string>& indexed);

}  // namespace tessera::status
