#include "runtime/caching_allocator.h"

#include "runtime/device.h"
#include "runtime/hardware_queue.h"
#include "runtime/memory_history.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "runtime/errors.h"

namespace torchneuron::runtime {

struct CachingAllocator::Block {
  CachingAllocator* owner;
  char* ptr;
  size_t size;       // rounded size of this block
  size_t requested;  // what the caller asked for, while allocated
  PoolKind pool;
  bool dedicated;  // carved from a segment sized for one large request
  bool allocated = false;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  uint64_t memory_pool = 0;  // the graph pool of its segment, or 0

  bool is_whole_segment() const { return prev == nullptr && next == nullptr; }
  bool is_split() const { return !is_whole_segment(); }
};

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->memory_pool != b->memory_pool) return a->memory_pool < b->memory_pool;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

void Stat::increase(int64_t amount) {
  current += amount;
  allocated += amount;
  peak = std::max(peak, current);
}

void Stat::decrease(int64_t amount) {
  current -= amount;
  freed += amount;
}

std::string format_bytes(int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

CachingAllocator::CachingAllocator(int device_index, size_t capacity_bytes,
                                   std::function<void()> drain_device)
    : device_index_(device_index), capacity_(capacity_bytes), drain_device_(std::move(drain_device)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [base, segment] : segments_) {
    for (Block* block = segment.first; block != nullptr;) {
      Block* next = block->next;
      delete block;
      block = next;
    }
    std::free(base);
  }
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return (rounded + kSegmentRounding - 1) / kSegmentRounding * kSegmentRounding;
}

void CachingAllocator::update_stat(StatArray& stat, PoolKind pool, int64_t delta) {
  for (PoolKind kind : {kAggregatePool, pool}) {
    if (delta >= 0) {
      stat[kind].increase(delta);
    } else {
      stat[kind].decrease(-delta);
    }
  }
}

void* CachingAllocator::allocate(size_t bytes, void** handle) {
  *handle = nullptr;
  if (bytes == 0) return nullptr;
  const size_t rounded = round_size(bytes);
  // The launching line is read before the lock: reading it may take the GIL.
  const char* site = memory_history::recording() ? capture_launch_site() : "";
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t memory_pool = routed_pool();
  Block* block = find_free_block(rounded, memory_pool);
  if (block == nullptr) block = allocate_segment(rounded, memory_pool);
  if (block == nullptr) {
    // Past capacity: wait for the device, return cached segments, and try once more.
    lock.unlock();
    drain_device_();
    lock.lock();
    stats_.num_alloc_retries += 1;
    release_free_segments();
    block = find_free_block(rounded, memory_pool);
    if (block == nullptr) block = allocate_segment(rounded, memory_pool);
  }
  if (block == nullptr) {
    stats_.num_ooms += 1;
    throw OutOfMemoryError(out_of_memory_message(bytes));
  }
  block = split(block, rounded);
  block->allocated = true;
  block->requested = bytes;
  update_stat(stats_.allocation, block->pool, 1);
  update_stat(stats_.active, block->pool, 1);
  update_stat(stats_.allocated_bytes, block->pool, static_cast<int64_t>(block->size));
  update_stat(stats_.active_bytes, block->pool, static_cast<int64_t>(block->size));
  update_stat(stats_.requested_bytes, block->pool, static_cast<int64_t>(bytes));
  *handle = block;
  if (memory_history::recording()) {
    memory_history::record(device_index_, MemoryAction::kAlloc, reinterpret_cast<uintptr_t>(block->ptr), block->size,
                           site);
  }
  return block->ptr;
}

CachingAllocator::Block* CachingAllocator::find_free_block(size_t rounded, uint64_t memory_pool) {
  FreeBlocks& pool = free_blocks(pool_kind_for(rounded));
  Block key{nullptr, nullptr, rounded, 0, kSmallPool, false};
  key.memory_pool = memory_pool;
  auto it = pool.lower_bound(&key);
  // A mid-size request must not pin a whole segment that was sized for one large request.
  while (it != pool.end() && (*it)->memory_pool == memory_pool && rounded < kMinLargeAlloc && (*it)->dedicated &&
         (*it)->is_whole_segment()) {
    ++it;
  }
  if (it == pool.end() || (*it)->memory_pool != memory_pool) return nullptr;
  Block* block = *it;
  pool.erase(it);
  if (block->is_split()) {
    update_stat(stats_.inactive_split, block->pool, -1);
    update_stat(stats_.inactive_split_bytes, block->pool, -static_cast<int64_t>(block->size));
  }
  return block;
}

CachingAllocator::Block* CachingAllocator::allocate_segment(size_t rounded, uint64_t memory_pool) {
  const size_t size = segment_size(rounded);
  const int64_t reserved = stats_.reserved_bytes[kAggregatePool].current;
  if (static_cast<size_t>(reserved) + size > capacity_) return nullptr;
  char* base = static_cast<char*>(std::aligned_alloc(4096, size));
  if (base == nullptr) return nullptr;
  const PoolKind pool = pool_kind_for(rounded);
  Block* block = new Block{this, base, size, 0, pool, rounded >= kMinLargeAlloc};
  block->memory_pool = memory_pool;
  segments_.emplace(base, Segment{block, size});
  if (memory_history::recording()) {
    memory_history::record(device_index_, MemoryAction::kSegmentAlloc, reinterpret_cast<uintptr_t>(base), size);
  }
  update_stat(stats_.segment, pool, 1);
  update_stat(stats_.reserved_bytes, pool, static_cast<int64_t>(size));
  stats_.num_device_alloc += 1;
  return block;
}

CachingAllocator::Block* CachingAllocator::split(Block* block, size_t rounded) {
  const size_t remaining = block->size - rounded;
  const size_t min_remainder = block->pool == kSmallPool ? kMinBlockSize : kSmallSize + 1;
  if (remaining < min_remainder) return block;
  Block* rest = new Block{this, block->ptr + rounded, remaining, 0, block->pool, block->dedicated};
  rest->memory_pool = block->memory_pool;
  rest->prev = block;
  rest->next = block->next;
  if (rest->next != nullptr) rest->next->prev = rest;
  block->next = rest;
  block->size = rounded;
  free_blocks(block->pool).insert(rest);
  update_stat(stats_.inactive_split, rest->pool, 1);
  update_stat(stats_.inactive_split_bytes, rest->pool, static_cast<int64_t>(rest->size));
  return block;
}

void CachingAllocator::release(void* handle) {
  if (handle == nullptr) return;
  Block* block = static_cast<Block*>(handle);
  CachingAllocator* owner = block->owner;
  std::lock_guard<std::mutex> lock(owner->mutex_);
  owner->free_block(block);
}

void CachingAllocator::free_block(Block* block) {
  if (memory_history::recording()) {
    // Frees complete at once: the queue runs in order, so later commands cannot see the block.
    const auto address = reinterpret_cast<uintptr_t>(block->ptr);
    memory_history::record(device_index_, MemoryAction::kFreeRequested, address, block->size);
    memory_history::record(device_index_, MemoryAction::kFreeCompleted, address, block->size);
  }
  block->allocated = false;
  update_stat(stats_.allocation, block->pool, -1);
  update_stat(stats_.active, block->pool, -1);
  update_stat(stats_.allocated_bytes, block->pool, -static_cast<int64_t>(block->size));
  update_stat(stats_.active_bytes, block->pool, -static_cast<int64_t>(block->size));
  update_stat(stats_.requested_bytes, block->pool, -static_cast<int64_t>(block->requested));
  block->requested = 0;

  FreeBlocks& pool = free_blocks(block->pool);
  // Merge with free neighbours so that a segment can become whole again.
  for (Block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || neighbour->allocated) continue;
    pool.erase(neighbour);
    update_stat(stats_.inactive_split, neighbour->pool, -1);
    update_stat(stats_.inactive_split_bytes, neighbour->pool, -static_cast<int64_t>(neighbour->size));
    if (neighbour == block->prev) {
      neighbour->size += block->size;
      neighbour->next = block->next;
      if (block->next != nullptr) block->next->prev = neighbour;
      delete block;
      block = neighbour;
    } else {
      block->size += neighbour->size;
      block->next = neighbour->next;
      if (neighbour->next != nullptr) neighbour->next->prev = block;
      delete neighbour;
    }
  }
  if (block->is_split()) {
    update_stat(stats_.inactive_split, block->pool, 1);
    update_stat(stats_.inactive_split_bytes, block->pool, static_cast<int64_t>(block->size));
  }
  pool.insert(block);
}

std::vector<CachingAllocator::SegmentInfo> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SegmentInfo> out;
  for (const auto& [base, segment] : segments_) {
    SegmentInfo info{reinterpret_cast<uintptr_t>(base), segment.size, segment.first->pool, segment.first->memory_pool, {}};
    for (const Block* b = segment.first; b != nullptr; b = b->next) {
      info.blocks.push_back(BlockInfo{reinterpret_cast<uintptr_t>(b->ptr), b->size, b->requested, b->allocated});
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return out;
}

size_t CachingAllocator::block_size(const void* handle) {
  return handle == nullptr ? 0 : static_cast<const Block*>(handle)->size;
}

int CachingAllocator::block_device(const void* handle) {
  return handle == nullptr ? 0 : static_cast<const Block*>(handle)->owner->device_index_;
}

void CachingAllocator::empty_cache() {
  drain_device_();
  std::lock_guard<std::mutex> lock(mutex_);
  release_free_segments();
}

void CachingAllocator::release_free_segments() {
  for (FreeBlocks* pool : {&small_blocks_, &large_blocks_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* block = *it;
      if (!block->is_whole_segment() || block->memory_pool != 0) {  // a graph's memory stays its own
        ++it;
        continue;
      }
      it = pool->erase(it);
      update_stat(stats_.segment, block->pool, -1);
      update_stat(stats_.reserved_bytes, block->pool, -static_cast<int64_t>(block->size));
      stats_.num_device_free += 1;
      segments_.erase(block->ptr);
      if (memory_history::recording()) {
        memory_history::record(device_index_, MemoryAction::kSegmentFree, reinterpret_cast<uintptr_t>(block->ptr),
                               block->size);
      }
      std::free(block->ptr);
      delete block;
    }
  }
}

std::string CachingAllocator::out_of_memory_message(size_t requested) const {
  const int64_t allocated = stats_.allocated_bytes[kAggregatePool].current;
  const int64_t reserved = stats_.reserved_bytes[kAggregatePool].current;
  const int64_t free_bytes = static_cast<int64_t>(capacity_) - reserved;
  return "neuron:" + std::to_string(device_index_) + " out of memory: tried to allocate " +
         format_bytes(static_cast<int64_t>(requested)) + "; " + format_bytes(allocated) +
         " allocated by tensors, " + format_bytes(reserved) + " reserved by the allocator, " +
         format_bytes(free_bytes) + " free of " + format_bytes(static_cast<int64_t>(capacity_)) +
         " capacity. Free tensors you no longer need, or raise TORCHNEURON_HBM_GB.";
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* stat :
       {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
        &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
        &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& s : *stat) s.reset_accumulated();
  }
  stats_.num_alloc_retries = stats_.num_ooms = 0;
  stats_.num_device_alloc = stats_.num_device_free = 0;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* stat :
       {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
        &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
        &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& s : *stat) s.reset_peak();
  }
}

uint64_t CachingAllocator::routed_pool() const {
  if (pool_routes_.empty()) return 0;
  const int64_t stream = current_stream(device_index_);
  for (const auto& [routed, pool] : pool_routes_) {
    if (routed == stream) return pool;
  }
  return 0;
}

void CachingAllocator::begin_allocate_to_pool(uint64_t pool, int64_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_routes_.emplace_back(stream, pool);
}

void CachingAllocator::end_allocate_to_pool(int64_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(pool_routes_.begin(), pool_routes_.end(), [&](const auto& r) { return r.first == stream; });
  if (it != pool_routes_.end()) pool_routes_.erase(it);
}

void CachingAllocator::retain_pool(uint64_t pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_users_[pool] += 1;
}

int CachingAllocator::pool_users(uint64_t pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pool_users_.find(pool);
  return it == pool_users_.end() ? 0 : it->second;
}

void CachingAllocator::release_pool(uint64_t pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto users = pool_users_.find(pool);
  if (users == pool_users_.end() || --users->second > 0) return;
  pool_users_.erase(users);
  // The queue runs in order: a replay still queued runs before any later user of this memory.
  for (auto& [base, segment] : segments_) {
    if (segment.first->memory_pool != pool) continue;
    for (Block* block = segment.first; block != nullptr; block = block->next) {
      if (block->allocated) {
        block->memory_pool = 0;
        continue;
      }
      FreeBlocks& blocks = free_blocks(block->pool);
      blocks.erase(block);  // its position in the set depends on its pool
      block->memory_pool = 0;
      blocks.insert(block);
    }
  }
}

bool CachingAllocator::owns(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [base, segment] : segments_) {
    if (p >= base && p < base + segment.size) return true;
  }
  return false;
}

}  // namespace torchneuron::runtime
