// The work of a queued command: a move-only callable kept inside the command itself when it
// fits. A launch then makes no heap allocation; with std::function the host thread allocated
// every kernel's captures and the queue worker freed them, and the two threads contended for
// malloc's arena lock on every op.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace torchneuron::runtime {

class KernelFunction {
 public:
  // Large enough for an elementwise launch's operand layout; bigger callables go to the heap.
  static constexpr size_t kInlineBytes = 512;

  KernelFunction() = default;
  KernelFunction(std::nullptr_t) {}  // NOLINT: an empty kernel, as with std::function

  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, KernelFunction> &&
                                                    std::is_invocable_v<std::decay_t<F>&>>>
  KernelFunction(F&& f) {  // NOLINT: lambdas convert implicitly, as to std::function
    using Target = std::decay_t<F>;
    if constexpr (fits_inline<Target>()) {
      new (storage_) Target(std::forward<F>(f));
      ops_ = &kInlineOps<Target>;
    } else {
      *reinterpret_cast<Target**>(storage_) = new Target(std::forward<F>(f));
      ops_ = &kHeapOps<Target>;
    }
  }

  KernelFunction(KernelFunction&& other) noexcept { take(other); }
  KernelFunction& operator=(KernelFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  KernelFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  KernelFunction(const KernelFunction&) = delete;
  KernelFunction& operator=(const KernelFunction&) = delete;
  ~KernelFunction() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  void operator()() { ops_->call(storage_); }

 private:
  struct Ops {
    void (*call)(void* storage);
    void (*move)(void* from, void* to) noexcept;  // leaves `from` destroyed
    void (*destroy)(void* storage) noexcept;
  };

  template <typename T>
  static constexpr bool fits_inline() {
    return sizeof(T) <= kInlineBytes && alignof(T) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<T>;
  }

  template <typename T>
  static constexpr Ops kInlineOps{
      [](void* s) { (*static_cast<T*>(s))(); },
      [](void* from, void* to) noexcept {
        new (to) T(std::move(*static_cast<T*>(from)));
        static_cast<T*>(from)->~T();
      },
      [](void* s) noexcept { static_cast<T*>(s)->~T(); },
  };

  template <typename T>
  static constexpr Ops kHeapOps{
      [](void* s) { (**static_cast<T**>(s))(); },
      [](void* from, void* to) noexcept { *static_cast<T**>(to) = *static_cast<T**>(from); },
      [](void* s) noexcept { delete *static_cast<T**>(s); },
  };

  void take(KernelFunction& other) noexcept {
    if (other.ops_ == nullptr) return;
    other.ops_->move(other.storage_, storage_);
    ops_ = other.ops_;
    other.ops_ = nullptr;
  }

  void reset() noexcept {
    if (ops_ == nullptr) return;
    ops_->destroy(storage_);
    ops_ = nullptr;
  }

  const Ops* ops_ = nullptr;
  alignas(std::max_align_t) unsigned char storage_[kInlineBytes];
};

}  // namespace torchneuron::runtime
