// Shared-memory collectives with threads as ranks (each maps the segment on its own), against
// sums and copies computed directly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "collectives/shared_memory_group.h"

namespace tc = torchneuron::collectives;
using namespace std::chrono_literals;

namespace {

// Runs body(group) on `size` threads, one rank each; rank 0 creates the segment first.
template <typename Body>
void run_ranks(int size, size_t slot_bytes, Body body) {
  const std::string name = "/torchneuron-test-" + std::to_string(::getpid());
  auto creator = tc::SharedMemoryGroup::create(name, 0, size, slot_bytes);
  std::vector<std::thread> threads;
  for (int rank = 1; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      auto group = tc::SharedMemoryGroup::open(name, rank, size, slot_bytes);
      body(group);
    });
  }
  body(creator);
  for (auto& thread : threads) thread.join();
  tc::SharedMemoryGroup::unlink(name);
}

}  // namespace

TEST(SharedMemoryGroup, AllreduceSumsAcrossChunksAndOddSizes) {
  const int size = 3;
  const size_t count = 1000 + 7;  // several 256-byte chunks, shares that do not divide evenly
  std::vector<std::vector<float>> results(size);
  run_ranks(size, 256, [&](tc::SharedMemoryGroup& group) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(i) * (group.rank() + 1);
    group.allreduce(data.data(), count, tc::ElementType::kFloat32, tc::Reduction::kSum, 5s);
    results[group.rank()] = data;
  });
  for (int rank = 0; rank < size; ++rank) {
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(results[rank][i], static_cast<float>(i) * 6) << rank << " " << i;
  }
}

TEST(SharedMemoryGroup, AllreduceMaxOfBFloat16AndInt64) {
  std::vector<uint16_t> halves(2);
  std::vector<int64_t> longs(2);
  run_ranks(2, 64, [&](tc::SharedMemoryGroup& group) {
    uint16_t bf16 = group.rank() == 0 ? 0x3f80 : 0x4000;  // 1.0 and 2.0
    group.allreduce(&bf16, 1, tc::ElementType::kBFloat16, tc::Reduction::kMax, 5s);
    int64_t value = group.rank() == 0 ? (int64_t{1} << 40) : -3;
    group.allreduce(&value, 1, tc::ElementType::kInt64, tc::Reduction::kMin, 5s);
    halves[group.rank()] = bf16;
    longs[group.rank()] = value;
  });
  EXPECT_EQ(halves[0], 0x4000);
  EXPECT_EQ(halves[1], 0x4000);
  EXPECT_EQ(longs[0], -3);
  EXPECT_EQ(longs[1], -3);
}

TEST(SharedMemoryGroup, AllgatherReduceScatterAndBroadcast) {
  const int size = 2;
  const size_t count = 100;
  std::vector<std::vector<int32_t>> gathered(size), scattered(size), broadcast(size);
  run_ranks(size, 128, [&](tc::SharedMemoryGroup& group) {
    const int r = group.rank();
    std::vector<int32_t> mine(count, r + 1), all(count * size);
    void* outputs[2] = {all.data(), all.data() + count};
    group.allgather(mine.data(), outputs, count * sizeof(int32_t), 5s);
    gathered[r] = all;
    std::vector<int32_t> input(count * size), output(count);
    std::iota(input.begin(), input.end(), r * 1000);
    group.reduce_scatter(input.data(), output.data(), count, tc::ElementType::kInt32, tc::Reduction::kSum, 5s);
    scattered[r] = output;
    std::vector<int32_t> data(count, r == 1 ? 42 : 0);
    group.broadcast(data.data(), count * sizeof(int32_t), 1, 5s);
    broadcast[r] = data;
  });
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < count * size; ++i) ASSERT_EQ(gathered[r][i], static_cast<int32_t>(i / count + 1));
    for (size_t i = 0; i < count; ++i) {
      // sum over ranks q of (q * 1000 + r * count + i)
      ASSERT_EQ(scattered[r][i], static_cast<int32_t>(1000 + 2 * (r * count + i)));
      ASSERT_EQ(broadcast[r][i], 42);
    }
  }
}

TEST(SharedMemoryGroup, MismatchedCollectivesRaiseOnEveryRank) {
  std::vector<std::string> errors(2);
  run_ranks(2, 64, [&](tc::SharedMemoryGroup& group) {
    std::vector<float> data(group.rank() == 0 ? 10 : 12, 1.0f);
    try {
      group.allreduce(data.data(), data.size(), tc::ElementType::kFloat32, tc::Reduction::kSum, 5s);
    } catch (const tc::CollectiveError& e) {
      errors[group.rank()] = e.what();
    }
  });
  for (const auto& error : errors) EXPECT_NE(error.find("collective mismatch"), std::string::npos) << error;
}

TEST(SharedMemoryGroup, AMissingPeerIsATimeoutNamingIt) {
  const std::string name = "/torchneuron-test-timeout-" + std::to_string(::getpid());
  auto group = tc::SharedMemoryGroup::create(name, 0, 2, 64);
  float value = 1.0f;
  try {
    group.allreduce(&value, 1, tc::ElementType::kFloat32, tc::Reduction::kSum, 200ms);
    FAIL() << "no timeout";
  } catch (const tc::CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("Timed out waiting 200ms for rank 1"), std::string::npos) << e.what();
  }
  tc::SharedMemoryGroup::unlink(name);
}

TEST(SharedMemoryGroup, RemoveOrphansTakesOnlyOldSegmentsOfGoneProcesses) {
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string prefix = "tn-orphan-test-" + std::to_string(getpid()) + "-";
  const std::string orphan = prefix + std::to_string(gone) + "-1";
  const std::string fresh_orphan = prefix + std::to_string(gone) + "-2";
  const std::string live = prefix + std::to_string(getpid()) + "-3";
  for (const std::string& name : {orphan, fresh_orphan, live}) {
    const int fd = shm_open(("/" + name).c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  timespec old[2];
  clock_gettime(CLOCK_REALTIME, &old[0]);
  old[0].tv_sec -= 600;
  old[1] = old[0];
  ASSERT_EQ(utimensat(AT_FDCWD, ("/dev/shm/" + orphan).c_str(), old, 0), 0);
  ASSERT_EQ(utimensat(AT_FDCWD, ("/dev/shm/" + live).c_str(), old, 0), 0);
  tc::SharedMemoryGroup::remove_orphans(prefix);
  EXPECT_NE(access(("/dev/shm/" + orphan).c_str(), F_OK), 0);
  EXPECT_EQ(access(("/dev/shm/" + fresh_orphan).c_str(), F_OK), 0);  // may still be in set-up
  EXPECT_EQ(access(("/dev/shm/" + live).c_str(), F_OK), 0);
  shm_unlink(("/" + fresh_orphan).c_str());
  shm_unlink(("/" + live).c_str());
}
