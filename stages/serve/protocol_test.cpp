#include "stages/serve/protocol.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/core/error.h"
#include "stages/serve/batcher.h"

namespace tessera::serve {
namespace {

TEST(ServeProtocol, CommandsRoundTrip) {
  Command c;
  c.kind = CommandKind::kSearch;
  c.jobs.push_back({{1.5f, -2.f, 0.25f}, 7, 3, "site = lung", 4, -1});
  c.jobs.push_back({{0.f, 0.f, 1.f}, 1, 0, "", -1, 2});
  const Command d = decode_command(encode_command(c));
  ASSERT_EQ(d.jobs.size(), 2u);
  EXPECT_EQ(d.kind, CommandKind::kSearch);
  EXPECT_EQ(d.jobs[0].vector, c.jobs[0].vector);
  EXPECT_EQ(d.jobs[0].k, 7);
  EXPECT_EQ(d.jobs[0].nprobe, 3);
  EXPECT_EQ(d.jobs[0].filter, "site = lung");
  EXPECT_EQ(d.jobs[0].exclude_slide, 4);
  EXPECT_EQ(d.jobs[1].exclude_patient_of, 2);
  EXPECT_EQ(decode_command(encode_command({CommandKind::kStop, {}})).kind, CommandKind::kStop);
  c.kind = CommandKind::kSearchNext;
  EXPECT_EQ(decode_command(encode_command(c)).kind, CommandKind::kSearchNext);
}

TEST(ServeProtocol, DamagedCommandsThrow) {
  Command c;
  c.jobs.push_back({{1.f, 2.f}, 5, 0, "x = 1", -1, -1});
  const std::string bytes = encode_command(c);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(decode_command(bytes.substr(0, n)), Error) << n;
  }
  EXPECT_THROW(decode_command(bytes + "x"), Error);
  std::string unknown = bytes;
  unknown[0] = 9;
  EXPECT_THROW(decode_command(unknown), Error);
}

TEST(ServeBatcher, GathersWhatArrivesWithinATickAndAnswersEach) {
  Batcher b;
  std::vector<std::future<std::vector<search::Hit>>> futures;
  for (int i = 0; i < 5; ++i) futures.push_back(b.submit({{}, i + 1, 0, "", -1, -1}));
  auto batch = b.take(std::chrono::milliseconds(10), std::chrono::milliseconds(1), 3);
  ASSERT_EQ(batch.size(), 3u);  // max_jobs
  EXPECT_EQ(batch[0].job.k, 1);
  EXPECT_EQ(batch[2].job.k, 3);
  for (auto& p : batch) p.result.set_value({search::Hit{1.f, p.job.k}});
  EXPECT_EQ(futures[1].get().at(0).patch_id, 2);
  EXPECT_EQ(b.queued(), 2u);
  b.close();
  EXPECT_THROW(futures[4].get(), Error);
  EXPECT_THROW(b.submit({}), Error);
  EXPECT_TRUE(b.take(std::chrono::milliseconds(1), std::chrono::milliseconds(1), 3).empty());
}

TEST(ServeBatcher, TakeReturnsNothingWhenNothingArrives) {
  Batcher b;
  EXPECT_TRUE(b.take(std::chrono::milliseconds(5), std::chrono::milliseconds(1), 8).empty());
  std::thread late([&] { b.submit({{}, 4, 0, "", -1, -1}); });
  const auto batch = b.take(std::chrono::seconds(30), std::chrono::milliseconds(1), 8);
  late.join();
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].job.k, 4);
}

// Issue 30, item 1: a job is searched in the generation its request resolved against, or not at
// all. A round takes the jobs of one generation wherever they are queued (a late job of the old
// generation behind new ones is not stuck), and once that generation is replaced its late jobs
// fail (503) instead of being answered from another.
TEST(ServeBatcher, JobsAreSearchedInTheirOwnGenerationOrRefused) {
  Batcher b;
  auto old1 = b.submit({{}, 1, 0, "", -1, -1}, 0);
  auto new1 = b.submit({{}, 2, 0, "", -1, -1}, 1);
  auto old2 = b.submit({{}, 3, 0, "", -1, -1}, 0);  // a request that held generation 0 longer
  EXPECT_EQ(b.queued(0), 2u);
  auto batch = b.take(std::chrono::milliseconds(10), std::chrono::milliseconds(1), 8, 0);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].job.k, 1);
  EXPECT_EQ(batch[1].job.k, 3);
  EXPECT_EQ(batch[0].generation, 0);
  b.answer(batch, {{search::Hit{1.f, 10}}, {search::Hit{1.f, 30}}});
  EXPECT_EQ(old1.get().at(0).patch_id, 10);
  EXPECT_EQ(old2.get().at(0).patch_id, 30);
  EXPECT_TRUE(b.take(std::chrono::milliseconds(1), std::chrono::milliseconds(1), 8, 0).empty());
  // Generation 0 is replaced; a job still stamped 0 arrives after the swap.
  auto late = b.submit({{}, 4, 0, "", -1, -1}, 0);
  EXPECT_EQ(b.fail_older(1), 1u);
  EXPECT_THROW(late.get(), Error);
  EXPECT_EQ(b.waiting_requests(), 1u);  // this thread, for new1
  batch = b.take(std::chrono::milliseconds(10), std::chrono::milliseconds(1), 8, 1);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].job.k, 2);
  b.answer(batch, {{search::Hit{1.f, 20}}});
  EXPECT_EQ(new1.get().at(0).patch_id, 20);
  // Without a stamp of its own, a job takes the Batcher's (set_generation).
  b.set_generation(1);
  auto unstamped = b.submit({{}, 5, 0, "", -1, -1});
  EXPECT_EQ(b.queued(1), 1u);
  b.close();
  EXPECT_THROW(unstamped.get(), Error);
}

}  // namespace
}  // namespace tessera::serve
