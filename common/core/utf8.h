// UTF-8 checks for text that tessera takes in (manifests, filters) or shows (status of damaged
// files). Strict: overlong forms, surrogates and code points above U+10FFFF are invalid, as in
// RFC 3629 and nlohmann::json, which refuses to write such text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera {

// The length (1 to 4) of the valid UTF-8 sequence starting at text[at], or 0 when the bytes there
// are not one (a stray continuation byte, a truncated, overlong or surrogate sequence).
// `at` < text.size().
size_t utf8_sequence_length(std::string_view text, size_t at);

// Whether all of `text` is valid UTF-8.
bool is_valid_utf8(std::string_view text);

// `text` with every byte that is not part of a valid sequence written as \xNN, so that it can be
// shown and written as JSON; valid text is returned unchanged.
std::string utf8_escaped(std::string_view text);

}  // namespace tessera
