// embed-image: embeds query patches with the model an embed run used, in a process of its own,
// so that the programs that search (query, serve) never load libtorch. They call it through
// stages/query/image_embedder.h:
//
//   embed-image --embed-config RUN/embed/<tag>/config.ini --model-json EXPECTED.json
//               --patches IN.u8 --count N --size S --out OUT.f32 [--device cpu] [--threads T]
//
// IN.u8 holds N patches of S x S RGB bytes (row-major, interleaved); OUT.f32 receives N x D
// little-endian float32 values, written atomically. The model is loaded as embed's config.ini
// describes it and must match EXPECTED (the catalog's model record) in kind, model, seed, sha256,
// preset and output_dim. Exit codes: 0, 1 (I/O or model failure), 2 (bad input, another model).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::embed {

// Not collective. Embeds `count` patches of `size` x `size` RGB bytes with the model embed's
// config.ini at `embed_config` describes, on `device` with `threads` torch threads; refuses
// (InvalidInput) a model that no longer matches `expected` on the fields above. Returns
// count x D floats.
std::vector<float> embed_with_run_model(const std::string& embed_config,
                                        const nlohmann::json& expected, const std::string& device,
                                        int threads, const uint8_t* rgb, int count, int size);

// The tool's entry point over its arguments (without the program name). Logs to stderr.
int image_tool_main(const std::vector<std::string>& args, std::ostream& err);

}  // namespace tessera::embed
