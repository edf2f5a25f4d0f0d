// Shared-memory collectives between the processes of one machine (see shared_memory_group.h).
#include "collectives/shared_memory_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <thread>

#include "runtime/cpu_relax.h"

namespace torchneuron::collectives {
namespace {

constexpr uint64_t kMagic = 0x6e6575726f6e5348;  // "neuronSH"
constexpr int kMaxRanks = 64;
constexpr size_t kDataOffset = 1 << 16;  // the header's 64 KiB, then the slots

// ---- element access: half types are reduced in float and rounded once ----

float bf16_to_float(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

template <typename Storage, typename Compute>
struct Element {
  static Compute load(const void* p, size_t i) { return static_cast<Compute>(static_cast<const Storage*>(p)[i]); }
  static void store(void* p, size_t i, Compute v) { static_cast<Storage*>(p)[i] = static_cast<Storage>(v); }
};
struct BFloat16Element {
  static float load(const void* p, size_t i) { return bf16_to_float(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = float_to_bf16(v); }
};
struct Float16Element {
  static float load(const void* p, size_t i) { return static_cast<float>(static_cast<const _Float16*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<_Float16*>(p)[i] = static_cast<_Float16>(v); }
};

template <typename T>
T combine(T a, T b, Reduction op) {
  switch (op) {
    case Reduction::kSum: return a + b;
    case Reduction::kProduct: return a * b;
    case Reduction::kMin: return (b < a || b != b) ? b : a;  // NaN propagates, as in ATen
    case Reduction::kMax: return (b > a || b != b) ? b : a;
  }
  return a;
}

// dest[i] = sources[0][i] op sources[1][i] op ..., in rank order, for `count` elements.
template <typename Access, typename Compute>
void reduce_into(void* dest, const void* const* sources, int num_sources, size_t count, Reduction op) {
  constexpr size_t kBlock = 1024;
  Compute acc[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = std::min(kBlock, count - start);
    for (size_t i = 0; i < n; ++i) acc[i] = Access::load(sources[0], start + i);
    for (int s = 1; s < num_sources; ++s) {
      for (size_t i = 0; i < n; ++i) acc[i] = combine(acc[i], Access::load(sources[s], start + i), op);
    }
    for (size_t i = 0; i < n; ++i) Access::store(dest, start + i, acc[i]);
  }
}

void reduce_elements(void* dest, const void* const* sources, int num_sources, size_t count, ElementType type,
                     Reduction op) {
  switch (type) {
    case ElementType::kFloat32: return reduce_into<Element<float, float>, float>(dest, sources, num_sources, count, op);
    case ElementType::kFloat64: return reduce_into<Element<double, double>, double>(dest, sources, num_sources, count, op);
    case ElementType::kFloat16: return reduce_into<Float16Element, float>(dest, sources, num_sources, count, op);
    case ElementType::kBFloat16: return reduce_into<BFloat16Element, float>(dest, sources, num_sources, count, op);
    case ElementType::kInt8: return reduce_into<Element<int8_t, int8_t>, int8_t>(dest, sources, num_sources, count, op);
    case ElementType::kUInt8: return reduce_into<Element<uint8_t, uint8_t>, uint8_t>(dest, sources, num_sources, count, op);
    case ElementType::kInt32: return reduce_into<Element<int32_t, int32_t>, int32_t>(dest, sources, num_sources, count, op);
    case ElementType::kInt64: return reduce_into<Element<int64_t, int64_t>, int64_t>(dest, sources, num_sources, count, op);
  }
}


}  // namespace

size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::kFloat64: case ElementType::kInt64: return 8;
    case ElementType::kFloat32: case ElementType::kInt32: return 4;
    case ElementType::kFloat16: case ElementType::kBFloat16: return 2;
    case ElementType::kInt8: case ElementType::kUInt8: return 1;
  }
  return 1;
}

const char* element_name(ElementType type) {
  static const char* names[] = {"float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64"};
  return names[static_cast<int>(type)];
}

// What each rank publishes before a collective, and the counter it advances at every barrier.
struct alignas(64) RankState {
  std::atomic<uint64_t> phase;
  std::atomic<uint64_t> signature[4];  // op name hash, then three numbers the ranks must agree on
  char op[24];
};

struct SharedMemoryGroup::Header {
  std::atomic<uint64_t> magic;  // written last: the rest of the header is ready when it is set
  uint64_t size;
  uint64_t slot_bytes;
  RankState ranks[kMaxRanks];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock-free");

namespace {

size_t segment_bytes(int size, size_t slot_bytes) { return kDataOffset + static_cast<size_t>(size) * slot_bytes; }

void* map_segment(int fd, size_t bytes, const std::string& name) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) throw CollectiveError("could not map shared memory '" + name + "': " + std::strerror(errno));
  return base;
}

}  // namespace

SharedMemoryGroup SharedMemoryGroup::create(const std::string& name, int rank, int size, size_t slot_bytes) {
  if (size < 1 || size > kMaxRanks) throw CollectiveError("shared-memory groups hold 1 to 64 ranks");
  const size_t bytes = segment_bytes(size, slot_bytes);
  shm_unlink(name.c_str());  // a leftover of a crashed job with the same name
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw CollectiveError("could not create shared memory '" + name + "': " + std::strerror(errno));
  // Reserved now: a full /dev/shm would otherwise fault (SIGBUS) at the first touch.
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    shm_unlink(name.c_str());
    throw CollectiveError("could not size shared memory '" + name + "' (" + std::to_string(bytes) +
                          " bytes; is /dev/shm large enough?): " + std::strerror(errno));
  }
  static_assert(sizeof(Header) <= kDataOffset);
  void* base = map_segment(fd, bytes, name);
  auto* header = new (base) Header();
  header->size = static_cast<uint64_t>(size);
  header->slot_bytes = slot_bytes;
  header->magic.store(kMagic, std::memory_order_release);
  return SharedMemoryGroup(base, bytes, rank, size, slot_bytes);
}

SharedMemoryGroup SharedMemoryGroup::open(const std::string& name, int rank, int size, size_t slot_bytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw CollectiveError("could not open shared memory '" + name + "': " + std::strerror(errno));
  const size_t bytes = segment_bytes(size, slot_bytes);
  void* base = map_segment(fd, bytes, name);
  auto* header = static_cast<Header*>(base);
  if (header->magic.load(std::memory_order_acquire) != kMagic || header->size != static_cast<uint64_t>(size) || header->slot_bytes != slot_bytes) {
    munmap(base, bytes);
    throw CollectiveError("shared memory '" + name + "' does not match this group");
  }
  return SharedMemoryGroup(base, bytes, rank, size, slot_bytes);
}

void SharedMemoryGroup::unlink(const std::string& name) { shm_unlink(name.c_str()); }

void SharedMemoryGroup::remove_orphans(const std::string& prefix) {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  const time_t now = time(nullptr);
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    struct stat info;
    if (pid <= 0 || (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) continue;
    if (stat(("/dev/shm/" + name).c_str(), &info) != 0 || now - info.st_mtime < 60) continue;
    shm_unlink(("/" + name).c_str());
  }
  closedir(dir);
}

SharedMemoryGroup::SharedMemoryGroup(void* base, size_t mapped_bytes, int rank, int size, size_t slot_bytes)
    : base_(base), mapped_bytes_(mapped_bytes), rank_(rank), size_(size), slot_bytes_(slot_bytes) {}

SharedMemoryGroup::SharedMemoryGroup(SharedMemoryGroup&& other) noexcept
    : base_(other.base_), mapped_bytes_(other.mapped_bytes_), rank_(other.rank_), size_(other.size_),
      slot_bytes_(other.slot_bytes_), phase_(other.phase_) {
  other.base_ = nullptr;
}

SharedMemoryGroup::~SharedMemoryGroup() {
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
}

unsigned char* SharedMemoryGroup::slot(int rank) const {
  return static_cast<unsigned char*>(base_) + kDataOffset + static_cast<size_t>(rank) * slot_bytes_;
}

void SharedMemoryGroup::barrier(std::chrono::milliseconds timeout) {
  auto* header = static_cast<Header*>(base_);
  const uint64_t phase = ++phase_;
  header->ranks[rank_].phase.store(phase, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  for (int peer = 0; peer < size_; ++peer) {
    // Spin briefly (the peer is usually close), then yield, then sleep: 2 ranks may share 2 cores.
    for (uint64_t tries = 0; header->ranks[peer].phase.load(std::memory_order_acquire) < phase; ++tries) {
      if (tries < 256) {
        runtime::cpu_relax();
      } else if (tries < 2048) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        if (std::chrono::steady_clock::now() - start > timeout) {
          throw CollectiveError("Timed out waiting " + std::to_string(timeout.count()) + "ms for rank " +
                                std::to_string(peer) + " at a shared-memory barrier");
        }
      }
    }
  }
}

void SharedMemoryGroup::begin(const char* op, uint64_t a, uint64_t b, uint64_t c, std::chrono::milliseconds timeout) {
  auto& mine = static_cast<Header*>(base_)->ranks[rank_];
  uint64_t hash = 1469598103934665603ull;
  for (const char* p = op; *p != '\0'; ++p) hash = (hash ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  std::strncpy(mine.op, op, sizeof(mine.op) - 1);
  mine.signature[0].store(hash, std::memory_order_relaxed);
  mine.signature[1].store(a, std::memory_order_relaxed);
  mine.signature[2].store(b, std::memory_order_relaxed);
  mine.signature[3].store(c, std::memory_order_relaxed);
  barrier(timeout);
  // Every rank reads the same signatures between this barrier and the next, so all of them
  // raise together on a mismatch, and none writes the next signature before the others read.
  for (int peer = 0; peer < size_; ++peer) {
    auto& theirs = static_cast<Header*>(base_)->ranks[peer];
    bool same = true;
    for (int i = 0; i < 4; ++i) same = same && theirs.signature[i].load() == mine.signature[i].load();
    if (!same) {
      throw CollectiveError("collective mismatch: rank " + std::to_string(rank_) + " called " + op + " (" +
                            std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + "), rank " +
                            std::to_string(peer) + " called " + std::string(theirs.op) + " (" +
                            std::to_string(theirs.signature[1].load()) + ", " + std::to_string(theirs.signature[2].load()) +
                            ", " + std::to_string(theirs.signature[3].load()) + ")");
    }
  }
}

void SharedMemoryGroup::allreduce(void* data, size_t count, ElementType type, Reduction op,
                                  std::chrono::milliseconds timeout) {
  const size_t width = element_size(type);
  begin("allreduce", count, static_cast<uint64_t>(type), static_cast<uint64_t>(op), timeout);
  const size_t chunk = slot_bytes_ / width;
  const void* sources[kMaxRanks];
  for (size_t start = 0; start < count; start += chunk) {
    const size_t n = std::min(chunk, count - start);
    auto* mine = static_cast<unsigned char*>(data) + start * width;
    std::memcpy(slot(rank_), mine, n * width);
    barrier(timeout);
    // This rank reduces its share of the chunk into its own slot; the others read theirs.
    const size_t share = (n + size_ - 1) / size_;
    const size_t begin_at = std::min(n, share * rank_), end_at = std::min(n, begin_at + share);
    if (end_at > begin_at) {
      for (int r = 0; r < size_; ++r) sources[r] = slot(r) + begin_at * width;
      reduce_elements(slot(rank_) + begin_at * width, sources, size_, end_at - begin_at, type, op);
    }
    barrier(timeout);
    for (int r = 0; r < size_; ++r) {
      const size_t from = std::min(n, share * r), to = std::min(n, from + share);
      if (to > from) std::memcpy(mine + from * width, slot(r) + from * width, (to - from) * width);
    }
    barrier(timeout);  // the slots are free again
  }
  if (count == 0) barrier(timeout);  // keeps the signatures until every rank has read them
}

void SharedMemoryGroup::allgather(const void* input, void* const* outputs, size_t bytes,
                                  std::chrono::milliseconds timeout) {
  begin("allgather", bytes, 0, 0, timeout);
  for (size_t start = 0; start < bytes; start += slot_bytes_) {
    const size_t n = std::min(slot_bytes_, bytes - start);
    std::memcpy(slot(rank_), static_cast<const unsigned char*>(input) + start, n);
    barrier(timeout);
    for (int r = 0; r < size_; ++r) std::memcpy(static_cast<unsigned char*>(outputs[r]) + start, slot(r), n);
    barrier(timeout);
  }
  if (bytes == 0) barrier(timeout);
}

void SharedMemoryGroup::reduce_scatter(const void* input, void* output, size_t count, ElementType type, Reduction op,
                                       std::chrono::milliseconds timeout) {
  const size_t width = element_size(type);
  begin("reduce_scatter", count, static_cast<uint64_t>(type), static_cast<uint64_t>(op), timeout);
  const size_t chunk = slot_bytes_ / width / size_;  // every rank stages a piece for each rank
  const void* sources[kMaxRanks];
  for (size_t start = 0; start < count; start += chunk) {
    const size_t n = std::min(chunk, count - start);
    for (int r = 0; r < size_; ++r) {
      std::memcpy(slot(rank_) + r * chunk * width, static_cast<const unsigned char*>(input) + (r * count + start) * width,
                  n * width);
    }
    barrier(timeout);
    for (int r = 0; r < size_; ++r) sources[r] = slot(r) + rank_ * chunk * width;
    reduce_elements(static_cast<unsigned char*>(output) + start * width, sources, size_, n, type, op);
    barrier(timeout);
  }
  if (count == 0) barrier(timeout);
}

void SharedMemoryGroup::broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout) {
  begin("broadcast", bytes, static_cast<uint64_t>(root), 0, timeout);
  for (size_t start = 0; start < bytes; start += slot_bytes_) {
    const size_t n = std::min(slot_bytes_, bytes - start);
    if (rank_ == root) std::memcpy(slot(root), static_cast<unsigned char*>(data) + start, n);
    barrier(timeout);
    if (rank_ != root) std::memcpy(static_cast<unsigned char*>(data) + start, slot(root), n);
    barrier(timeout);
  }
  if (bytes == 0) barrier(timeout);
}

}  // namespace torchneuron::collectives
