// Api's request parsing (api.h): the bodies of search, heatmap, similar-slides/patients and
// mosaic-vote, checked against the limits, and the JSON error body.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/utf8.h"
#include "stages/serve/api.h"
#include "stages/serve/json_fields.h"

namespace tessera::serve {

using nlohmann::json;

namespace {

std::string base64_decode(const std::string& text) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=' ) break;
    if (c == '\n' || c == '\r') continue;
    const size_t v = kAlphabet.find(c);
    if (v == std::string::npos) fail<InvalidInput>("'image' is not base64 (character '{}')", c);
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

int parse_k(const json& j, const Limits& limits) {
  if (!j.contains("k")) return 10;
  const int64_t k = field<int64_t>(j, "k", "an integer");
  if (k < 1 || k > limits.max_k) fail<InvalidInput>("'k' must be 1..{}, not {}", limits.max_k, k);
  return static_cast<int>(k);
}

std::string parse_id_field(const json& j, const char* name) {
  if (!j.contains(name)) fail<InvalidInput>("give '{}'", name);
  std::string id = field<std::string>(j, name, "a string");
  if (id.empty()) fail<InvalidInput>("'{}' is empty", name);
  if (id.size() > 1024) fail<InvalidInput>("'{}' is {} characters long", name, id.size());
  return id;
}

}  // namespace

std::string Request::param(const std::string& name) const {
  const auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

Response error_response(int status, const std::string& message) {
  // A message may quote bytes of the request: escaped, or the JSON writer would throw.
  return {status, "application/json",
          json{{"error", {{"code", status}, {"message", utf8_escaped(message)}}}}.dump(), {}};
}

QuerySpec parse_query(const std::string& body, const Limits& limits) {
  const json j = parse_body(body);
  QuerySpec q;
  int sources = 0;
  if (j.contains("patch_id")) {
    q.patch_id = field<int64_t>(j, "patch_id", "an integer");
    ++sources;
  }
  if (j.contains("slide_id")) {
    q.slide_id = field<std::string>(j, "slide_id", "a string");
    if (!j.contains("x") || !j.contains("y")) fail<InvalidInput>("'slide_id' needs 'x' and 'y'");
    q.x = field<int64_t>(j, "x", "an integer");
    q.y = field<int64_t>(j, "y", "an integer");
    if (j.contains("box")) {
      q.box = field<std::vector<int64_t>>(j, "box", "[x, y, width, height]");
      if (q.box.size() != 4 || q.box[2] <= 0 || q.box[3] <= 0) {
        fail<InvalidInput>("'box' must be [x, y, width, height] with a positive width and height");
      }
    }
    ++sources;
  }
  if (j.contains("vector")) {
    q.vector = field<std::vector<float>>(j, "vector", "an array of numbers");
    if (q.vector.empty()) fail<InvalidInput>("'vector' is empty");
    for (float v : q.vector) {
      if (!std::isfinite(v)) fail<InvalidInput>("'vector' holds a value that is not finite");
    }
    ++sources;
  }
  if (j.contains("image")) {
    q.image = base64_decode(field<std::string>(j, "image", "a base64 string"));
    if (q.image.empty()) fail<InvalidInput>("'image' is empty");
    ++sources;
  }
  if (sources != 1) {
    fail<InvalidInput>("give exactly one query: 'patch_id', 'slide_id' with 'x' and 'y', "
                       "'vector' or 'image'");
  }
  if (j.contains("k")) {
    const int64_t k = field<int64_t>(j, "k", "an integer");
    if (k < 1 || k > limits.max_k) fail<InvalidInput>("'k' must be 1..{}, not {}", limits.max_k, k);
    q.k = static_cast<int>(k);
  }
  q.nprobe = parse_nprobe(j);
  q.filter = parse_filter(j, limits.max_filter_chars);
  if (j.contains("exclude_same_slide")) {
    q.exclude_same_slide = field<bool>(j, "exclude_same_slide", "true or false");
  }
  if (j.contains("exclude_same_patient")) {
    q.exclude_same_patient = field<bool>(j, "exclude_same_patient", "true or false");
  }
  return q;
}

SimilarSpec parse_similar(const std::string& body, const char* id_field, const Limits& limits) {
  const json j = parse_body(body);
  SimilarSpec s;
  s.id = parse_id_field(j, id_field);
  s.k = parse_k(j, limits);
  if (j.contains("exclude_same_patient")) {
    s.exclude_same_patient = field<bool>(j, "exclude_same_patient", "true or false");
  }
  if (j.contains("index") && !j.at("index").is_null()) {
    s.index = field<std::string>(j, "index", "a string (an index name from /api/v1/info)");
  }
  return s;
}

VoteSpec parse_vote(const std::string& body, const Limits& limits) {
  const json j = parse_body(body);
  VoteSpec v;
  v.slide_id = parse_id_field(j, "slide_id");
  v.k = parse_k(j, limits);
  v.top = v.k;
  if (j.contains("top")) {
    const int64_t top = field<int64_t>(j, "top", "an integer");
    if (top < 1 || top > limits.max_k) {
      fail<InvalidInput>("'top' must be 1..{}, not {}", limits.max_k, top);
    }
    v.top = static_cast<int>(top);
  }
  v.nprobe = parse_nprobe(j);
  v.filter = parse_filter(j, limits.max_filter_chars);
  if (j.contains("exclude_same_patient")) {
    v.exclude_same_patient = field<bool>(j, "exclude_same_patient", "true or false");
  }
  if (j.contains("mosaic_percent")) {
    v.mosaic_percent = field<double>(j, "mosaic_percent", "a number");
    if (!(v.mosaic_percent > 0 && v.mosaic_percent <= 100)) {
      fail<InvalidInput>("'mosaic_percent' must be in (0, 100]");
    }
  }
  if (j.contains("mosaic_min")) {
    const int64_t m = field<int64_t>(j, "mosaic_min", "an integer");
    if (m < 1 || m > 256) fail<InvalidInput>("'mosaic_min' must be 1..256, not {}", m);
    v.mosaic_min = static_cast<int>(m);
  }
  return v;
}

}  // namespace tessera::serve
