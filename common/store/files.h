// Names of the files the stages exchange inside their stage directories. The readers and writers
// of these files live in common/store (and common/vector for the FAISS shards and catalog);
// stages ask for the names here instead of spelling them.
#pragma once

namespace tessera {

inline constexpr const char* kIndexFile = "index.h5";            // patchgen: the patch index
inline constexpr const char* kPlansDir = "plans";                // patchgen: plans/<slide_id>.h5
inline constexpr const char* kShardsDir = "shards";              // rank shards of every stage
inline constexpr const char* kEmbeddingsFile = "embeddings.h5";  // embed: the consolidated view
inline constexpr const char* kSlideStatusFile = "slides.csv";    // embed: per-slide status table
inline constexpr const char* kFeaturesDir = "features";          // embed: features/<slide_id>.h5

}  // namespace tessera
