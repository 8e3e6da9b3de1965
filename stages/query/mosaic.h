// A picture of one query and its nearest neighbours: the query patch and the top-k hits as
// captioned tiles on a white PNG, for a person to judge the hits at a glance.
#pragma once

#include <string>
#include <vector>

#include "common/slide/png_io.h"

namespace tessera::query {

// One tile: an 8-bit gray or RGB image of any size, or an empty image (width or height 0, no
// pixels) meaning "pixels unavailable", drawn as a grey box saying "no pixels"; and the caption
// lines written beneath it (e.g. "#1  0.9321", the slide id, "x=1234 y=5678").
struct MosaicTile {
  Image8 image;
  std::vector<std::string> caption;
};

// Where write_mosaic puts things, in pixels. Cell 0 is the query, alone on the first row; cell
// 1 + i is hit i, row 1 + i / columns, column i % columns. Every tile is a tile_size square at
// (tile_x, tile_y); its caption lines start pad below it (caption_y), each line_height tall.
struct MosaicLayout {
  int tile_size = 0;
  int pad = 0;             // max(6, tile_size / 24): margin around each tile inside its cell
  int frame = 0;           // max(3, tile_size / 64): thickness of the query's frame
  int line_height = 0;     // of one caption line at the font scale fitting 28 characters
  int caption_lines = 0;   // the most lines of any tile (the query's include its "query" tag)
  int caption_height = 0;  // caption_lines * line_height
  int columns = 0;         // min(max(hits, 1), 5)
  int rows = 0;            // 1 + ceil(hits / columns)
  int cell_width = 0;      // tile_size + 2 * pad
  int cell_height = 0;     // pad + tile_size + pad + caption_height + pad
  int width = 0;           // columns * cell_width
  int height = 0;          // rows * cell_height
  int tile_x(int cell) const;
  int tile_y(int cell) const;
  int caption_y(int cell) const { return tile_y(cell) + tile_size + pad; }
};

// The layout of a mosaic with `hits` hits whose longest caption (counting the query's "query"
// tag line) has `caption_lines` lines. Throws InvalidInput for a tile_size outside [32, 2048] or
// a mosaic over 2^28 pixels.
MosaicLayout mosaic_layout(int tile_size, int hits, int caption_lines);

// The colour (R, G, B) of the frame around the query tile and of its "query" tag; a saturated
// green, which H&E-stained tissue does not contain.
constexpr unsigned char kQueryFrameRgb[3] = {0, 176, 64};

// Writes the mosaic of `query` and `hits` (in rank order) to the PNG `path` atomically (write_png),
// laid out as mosaic_layout(tile_size, hits.size(), longest caption) says: white background;
// each image scaled to fit a tile_size square keeping its aspect ratio (INTER_AREA when shrinking,
// centred); hits framed by a thin grey border; the query framed in kQueryFrameRgb, its caption
// led by a "query" tag (white text on a band of kQueryFrameRgb); caption lines in dark Hershey
// text sized so that about 28 characters fit the tile width, longer lines cut and ended with
// "...". Thread-safe for distinct paths. Throws InvalidInput as mosaic_layout, or for a tile whose
// pixel count does not match its size or whose channels are not 1 or 3; IoError naming `path`
// when it cannot be written.
void write_mosaic(const std::string& path, const MosaicTile& query,
                  const std::vector<MosaicTile>& hits, int tile_size = 224);

}  // namespace tessera::query
