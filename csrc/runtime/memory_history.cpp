#include "runtime/memory_history.h"

#include <chrono>
#include <deque>
#include <mutex>


namespace torchneuron::runtime::memory_history {
namespace {

std::mutex history_mutex;
size_t capacity = 0;
std::deque<MemoryEvent>& history() {
  static auto* events = new std::deque<MemoryEvent>();  // never destroyed: frees may come late
  return *events;
}

}  // namespace

std::atomic<bool> recording_flag{false};

void set_recording(bool enabled, size_t max_entries) {
  std::lock_guard<std::mutex> lock(history_mutex);
  if (enabled) {
    capacity = max_entries;
    while (history().size() > capacity) history().pop_front();
  } else {
    history().clear();
  }
  recording_flag.store(enabled, std::memory_order_release);
}

void record(int device, MemoryAction action, uintptr_t address, size_t size, const char* site) {
  MemoryEvent event;
  event.device = device;
  event.action = action;
  event.address = address;
  event.size = size;
  event.site = site;
  event.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::lock_guard<std::mutex> lock(history_mutex);
  if (capacity == 0) return;
  if (history().size() >= capacity) history().pop_front();
  history().push_back(event);
}

std::vector<MemoryEvent> events() {
  std::lock_guard<std::mutex> lock(history_mutex);
  return {history().begin(), history().end()};
}

}  // namespace torchneuron::runtime::memory_history
