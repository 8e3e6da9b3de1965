// What the files of Api (api.h) share: api.cpp (the route table), api_request.cpp, api_access.cpp,
// api_search.cpp, api_tiles.cpp and slide_api.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include "stages/serve/api.h"

namespace tessera::serve {

// A 200 answer with `j` as its JSON body.
inline Response json_response(const nlohmann::json& j) { return {200, "application/json", j.dump(), {}}; }

}  // namespace tessera::serve
