#include "stages/query/mosaic.h"

#include <algorithm>
#include <cstdint>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "common/core/error.h"

namespace tessera::query {

namespace {

constexpr int kMaxColumns = 5;
constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
constexpr int kThickness = 1;
// A caption line of the width the font is sized for (28 characters).
constexpr char kSizingLine[] = "#10  0.9321  TCGA-A1-B2C3-01";
constexpr char kEllipsis[] = "...";

const cv::Scalar kWhite(255, 255, 255);
const cv::Scalar kText(25, 25, 25);
const cv::Scalar kBorder(150, 150, 150);
const cv::Scalar kMissingFill(215, 215, 215);
const cv::Scalar kMissingText(90, 90, 90);
const cv::Scalar kQueryColour(kQueryFrameRgb[0], kQueryFrameRgb[1], kQueryFrameRgb[2]);

struct Font {
  double scale = 1.0;
  int ascent = 0;  // height above the baseline
  int line_height = 0;
};

Font font_for(int tile_size) {
  int baseline = 0;
  const cv::Size unit = cv::getTextSize(kSizingLine, kFont, 1.0, kThickness, &baseline);
  Font font;
  font.scale = static_cast<double>(tile_size - 4) / unit.width;
  const cv::Size sized = cv::getTextSize(kSizingLine, kFont, font.scale, kThickness, &baseline);
  font.ascent = sized.height;
  font.line_height = sized.height + baseline + std::max(3, sized.height / 2);
  return font;
}

int text_width(const std::string& text, const Font& font) {
  int baseline = 0;
  return cv::getTextSize(text, kFont, font.scale, kThickness, &baseline).width;
}

// `line` cut to fit `width` pixels, ending with "..." when cut.
std::string fit(const std::string& line, int width, const Font& font) {
  if (text_width(line, font) <= width) return line;
  std::string cut = line;
  while (!cut.empty() && text_width(cut + kEllipsis, font) > width) cut.pop_back();
  return cut + kEllipsis;
}

// Draws `image` scaled into the square `box` of `canvas` (RGB), or the "no pixels" box.
void draw_image(cv::Mat& canvas, const cv::Rect& box, const Image8& image, const Font& font,
                const std::string& what) {
  if (image.width <= 0 || image.height <= 0) {
    cv::rectangle(canvas, box, kMissingFill, cv::FILLED);
    const std::string label = "no pixels";
    const cv::Point at(box.x + (box.width - text_width(label, font)) / 2,
                       box.y + (box.height + font.ascent) / 2);
    cv::putText(canvas, label, at, kFont, font.scale, kMissingText, kThickness, cv::LINE_AA);
    return;
  }
  if ((image.channels != 1 && image.channels != 3) ||
      image.pixels.size() !=
          static_cast<size_t>(image.width) * static_cast<size_t>(image.height) * image.channels) {
    fail<InvalidInput>("mosaic: {} image claims {}x{}x{} but holds {} bytes", what, image.width,
                       image.height, image.channels, image.pixels.size());
  }
  cv::Mat source(image.height, image.width, image.channels == 1 ? CV_8UC1 : CV_8UC3,
                 const_cast<uint8_t*>(image.pixels.data()));
  cv::Mat rgb;
  if (image.channels == 1) {
    cv::cvtColor(source, rgb, cv::COLOR_GRAY2RGB);
  } else {
    rgb = source;
  }
  const double scale = std::min(static_cast<double>(box.width) / image.width,
                                static_cast<double>(box.height) / image.height);
  const int w = std::clamp(static_cast<int>(image.width * scale + 0.5), 1, box.width);
  const int h = std::clamp(static_cast<int>(image.height * scale + 0.5), 1, box.height);
  const cv::Rect target(box.x + (box.width - w) / 2, box.y + (box.height - h) / 2, w, h);
  cv::Mat roi = canvas(target);
  if (w == image.width && h == image.height) {
    rgb.copyTo(roi);
  } else {
    cv::resize(rgb, roi, roi.size(), 0, 0, scale < 1.0 ? cv::INTER_AREA : cv::INTER_LINEAR);
  }
}

// Draws caption `lines` from (x, y) down; with `label`, the first line is a tag: white text on a
// band of `label_colour`.
void draw_caption(cv::Mat& canvas, int x, int y, const std::vector<std::string>& lines, bool label,
                  const cv::Scalar& label_colour, const MosaicLayout& layout, const Font& font) {
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string text = fit(lines[i], layout.tile_size - (label ? 8 : 0), font);
    const int top = y + static_cast<int>(i) * layout.line_height;
    const bool tag = label && i == 0;
    if (tag) {
      cv::rectangle(canvas, cv::Rect(x, top, text_width(text, font) + 8, layout.line_height - 1),
                    label_colour, cv::FILLED);
    }
    const int baseline = tag ? top + (layout.line_height - 1 + font.ascent) / 2 : top + font.ascent;
    const cv::Point at(x + (tag ? 4 : 0), baseline);
    cv::putText(canvas, text, at, kFont, font.scale, tag ? kWhite : kText, kThickness, cv::LINE_AA);
  }
}

}  // namespace

int MosaicLayout::tile_x(int cell) const {
  const int column = cell == 0 ? 0 : (cell - 1) % columns;
  return column * cell_width + pad;
}

int MosaicLayout::tile_y(int cell) const {
  const int row = cell == 0 ? 0 : 1 + (cell - 1) / columns;
  return row * cell_height + pad;
}

MosaicLayout mosaic_layout(int tile_size, int hits, int caption_lines) {
  if (tile_size < 32 || tile_size > 2048) {
    fail<InvalidInput>("mosaic tile size {} is outside [32, 2048]", tile_size);
  }
  MosaicLayout l;
  l.tile_size = tile_size;
  l.pad = std::max(6, tile_size / 24);
  l.frame = std::max(3, tile_size / 64);
  l.line_height = font_for(tile_size).line_height;
  l.caption_lines = std::max(0, caption_lines);
  l.caption_height = l.caption_lines * l.line_height;
  l.columns = std::clamp(hits, 1, kMaxColumns);
  l.rows = 1 + (std::max(hits, 0) + l.columns - 1) / l.columns;
  l.cell_width = tile_size + 2 * l.pad;
  l.cell_height = tile_size + l.caption_height + 3 * l.pad;
  const int64_t pixels = int64_t{l.columns} * l.cell_width * int64_t{l.rows} * l.cell_height;
  if (pixels > (int64_t{1} << 28)) {
    fail<InvalidInput>("a mosaic of {} hits at tile size {} would have {} pixels, over 2^28", hits,
                       tile_size, pixels);
  }
  l.width = l.columns * l.cell_width;
  l.height = l.rows * l.cell_height;
  return l;
}

void write_mosaic(const std::string& path, const MosaicTile& query,
                  const std::vector<MosaicTile>& hits, int tile_size) {
  std::vector<std::string> query_caption{"query"};
  query_caption.insert(query_caption.end(), query.caption.begin(), query.caption.end());
  size_t lines = query_caption.size();
  for (const MosaicTile& hit : hits) lines = std::max(lines, hit.caption.size());
  const MosaicLayout layout =
      mosaic_layout(tile_size, static_cast<int>(hits.size()), static_cast<int>(lines));
  const Font font = font_for(tile_size);

  Image8 out{layout.width, layout.height, 3, {}};
  out.pixels.assign(static_cast<size_t>(layout.width) * layout.height * 3, 255);
  cv::Mat canvas(layout.height, layout.width, CV_8UC3, out.pixels.data());

  const auto draw_tile = [&](int cell, const MosaicTile& tile,
                             const std::vector<std::string>& caption, bool is_query) {
    const cv::Rect box(layout.tile_x(cell), layout.tile_y(cell), tile_size, tile_size);
    if (is_query) {
      // A filled rectangle under the tile box, so the frame's thickness is exact.
      const int f = layout.frame;
      cv::rectangle(canvas, cv::Rect(box.x - f, box.y - f, box.width + 2 * f, box.height + 2 * f),
                    kQueryColour, cv::FILLED);
      cv::rectangle(canvas, box, kWhite, cv::FILLED);
    } else {
      cv::rectangle(canvas, cv::Rect(box.x - 1, box.y - 1, box.width + 2, box.height + 2), kBorder,
                    1);
    }
    draw_image(canvas, box, tile.image, font,
               is_query ? std::string("query") : "hit #" + std::to_string(cell));
    draw_caption(canvas, box.x, layout.caption_y(cell), caption, is_query, kQueryColour, layout,
                 font);
  };
  draw_tile(0, query, query_caption, true);
  for (size_t i = 0; i < hits.size(); ++i) {
    draw_tile(static_cast<int>(i) + 1, hits[i], hits[i].caption, false);
  }
  try {
    write_png(path, out);
  } catch (const IoError& e) {
    fail<IoError>("cannot write mosaic '{}': {}", path, e.what());
  }
}

}  // namespace tessera::query
