// Caching allocator for one device's HBM: size-class pools of blocks carved from segments,
// split and merged, with CUDA-style statistics and an out-of-memory error past capacity.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace torchneuron::runtime {

// One statistic as torch reports it: current value, peak, and running totals.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // total increases
  int64_t freed = 0;      // total decreases

  void increase(int64_t amount);
  void decrease(int64_t amount);
  void reset_accumulated() { allocated = freed = 0; }
  void reset_peak() { peak = current; }
};

enum PoolKind : int { kAggregatePool = 0, kSmallPool = 1, kLargePool = 2, kNumPoolKinds = 3 };
using StatArray = std::array<Stat, kNumPoolKinds>;

struct AllocatorStats {
  StatArray allocation;            // count of live allocations
  StatArray segment;               // count of segments taken from HBM
  StatArray active;                // count of blocks in use
  StatArray inactive_split;        // count of free blocks inside partly used segments
  StatArray allocated_bytes;       // bytes of blocks handed out (rounded)
  StatArray reserved_bytes;        // bytes of all segments
  StatArray active_bytes;          // bytes of blocks in use
  StatArray inactive_split_bytes;  // bytes of free blocks inside partly used segments
  StatArray requested_bytes;       // bytes asked for by callers (unrounded)
  int64_t num_alloc_retries = 0;   // allocations that had to free the cache first
  int64_t num_ooms = 0;
  int64_t num_device_alloc = 0;  // segments taken from HBM
  int64_t num_device_free = 0;   // segments returned to HBM
};

class CachingAllocator {
 public:
  static constexpr size_t kMinBlockSize = 512;
  static constexpr size_t kSmallSize = 1 << 20;         // requests up to this use the small pool
  static constexpr size_t kSmallSegment = 2 << 20;      // segment size of the small pool
  static constexpr size_t kLargeSegment = 20 << 20;     // segment size for mid-size requests
  static constexpr size_t kMinLargeAlloc = 10 << 20;    // above this, a segment per request
  static constexpr size_t kSegmentRounding = 2 << 20;

  // `drain_device` waits until no queued command can touch memory about to be released.
  CachingAllocator(int device_index, size_t capacity_bytes, std::function<void()> drain_device);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns the block's address; `*handle` is what `release` takes back. Zero bytes gives
  // nullptr. Throws OutOfMemoryError past capacity.
  void* allocate(size_t bytes, void** handle);
  // Returns a block to its pool; callable from any thread.
  static void release(void* handle);

  // Returns unused segments to HBM, after the device has drained.
  void empty_cache();

  AllocatorStats stats() const;
  void reset_accumulated_stats();
  void reset_peak_stats();
  size_t capacity() const { return capacity_; }
  int device_index() const { return device_index_; }
  // True when `ptr` lies in a segment of this allocator.
  bool owns(const void* ptr) const;

  // Graph memory pools (pool 0 is everyone's). Allocations made while a stream routed to a pool
  // is current take the pool's blocks and segments only, and what a pool holds never serves
  // pool 0 while the pool has users, so a captured graph's memory stays valid for its replays.
  void begin_allocate_to_pool(uint64_t pool, int64_t stream);
  void end_allocate_to_pool(int64_t stream);
  void retain_pool(uint64_t pool);
  // Drops a user; with the last gone, the pool's memory (free and live) joins pool 0.
  void release_pool(uint64_t pool);
  int pool_users(uint64_t pool) const;

  // Every segment with its blocks in address order, for memory snapshots.
  struct BlockInfo {
    uintptr_t address;
    size_t size, requested;
    bool allocated;
  };
  struct SegmentInfo {
    uintptr_t address;
    size_t size;
    PoolKind pool;
    uint64_t memory_pool;  // 0, or the graph pool it belongs to
    std::vector<BlockInfo> blocks;
  };
  std::vector<SegmentInfo> snapshot() const;
  // The rounded size of the allocated block behind `handle` (what allocate returned it for).
  static size_t block_size(const void* handle);
  static int block_device(const void* handle);

 private:
  struct Block;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeBlocks = std::set<Block*, BlockOrder>;

  static size_t round_size(size_t bytes);
  static size_t segment_size(size_t rounded);
  static PoolKind pool_kind_for(size_t rounded) { return rounded <= kSmallSize ? kSmallPool : kLargePool; }
  FreeBlocks& free_blocks(PoolKind pool) { return pool == kSmallPool ? small_blocks_ : large_blocks_; }
  Block* find_free_block(size_t rounded, uint64_t memory_pool);
  Block* allocate_segment(size_t rounded, uint64_t memory_pool);  // nullptr past capacity
  uint64_t routed_pool() const;  // caller holds mutex_
  Block* split(Block* block, size_t rounded);
  void free_block(Block* block);
  void release_free_segments();  // caller holds mutex_
  std::string out_of_memory_message(size_t requested) const;
  void update_stat(StatArray& stat, PoolKind pool, int64_t delta);

  const int device_index_;
  const size_t capacity_;
  const std::function<void()> drain_device_;
  mutable std::mutex mutex_;
  FreeBlocks small_blocks_;
  FreeBlocks large_blocks_;
  struct Segment {
    Block* first;
    size_t size;
  };
  std::unordered_map<char*, Segment> segments_;  // keyed by base address
  std::vector<std::pair<int64_t, uint64_t>> pool_routes_;  // (stream, pool) of the capturing streams
  std::unordered_map<uint64_t, int> pool_users_;
  AllocatorStats stats_;
};

// Human-readable byte count, "1.50 GiB".
std::string format_bytes(int64_t bytes);

}  // namespace torchneuron::runtime
