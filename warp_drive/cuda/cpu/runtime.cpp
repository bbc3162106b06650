// The cpu executor's runtime: runs the blocks of a launch on a pool of host
// threads and the threads of a block as fibers.
//
// One shared library per process (loaded RTLD_GLOBAL); kernel libraries call
// back into it for barriers and device failures. Why each piece is as it is:
//   * Fibers switch with a hand-written x86-64 routine (6 callee-saved
//     registers and the stack pointer); glibc's swapcontext makes a syscall per
//     switch and is ~10x slower. Other architectures fall back to ucontext.
//   * A block first runs thread 0 on a fiber. If it finishes without reaching a
//     barrier, no other thread may legally reach one (thread 0 has exited), so
//     the rest run as plain calls: the fast path, where a barrier is reported
//     as a divergent barrier instead of silently giving wrong answers.
//   * A block of one thread (how AGENT_PHASES kernels run here: one host
//     thread loops over an env's agents) runs as a plain call from the start;
//     the emulation header returns its barriers at once.
//   * At every barrier all live threads must wait at the same __syncthreads
//     call site; anything else (some exited, or different sites) is an error
//     naming the kernel, not a hang.
//   * Blocks are claimed through one 64-bit ticket {launch sequence, next
//     block}, so a worker that wakes late can never run a block of an older
//     launch with a newer launch's arguments.
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define WD_ASAN 1
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

struct dim3 {
  unsigned int x, y, z;
};
extern "C" {
struct wd_thread_index {
  dim3 thread, block, block_dim, grid_dim;
  int block_changed;
};
typedef void (*wd_thread_fn)(void* const* args, const struct wd_thread_index* index);
typedef void (*wd_threads_fn)(void* const* args, struct wd_thread_index* index, unsigned int count);
}

#define WD_EXPORT extern "C" __attribute__((visibility("default")))

// ------------------------------------------------------------------ fibers
namespace {

#if defined(__x86_64__)
extern "C" void wd_fiber_switch(void** save_sp, void* next_sp);
extern "C" void wd_fiber_trampoline();
asm(R"(
    .text
    .p2align 4
    .hidden wd_fiber_switch
    .globl wd_fiber_switch
    .type wd_fiber_switch,@function
wd_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size wd_fiber_switch,.-wd_fiber_switch

    .p2align 4
    .hidden wd_fiber_trampoline
    .globl wd_fiber_trampoline
    .type wd_fiber_trampoline,@function
wd_fiber_trampoline:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size wd_fiber_trampoline,.-wd_fiber_trampoline
)");
#endif

size_t page_size() {
  static size_t size = (size_t)sysconf(_SC_PAGESIZE);
  return size;
}

size_t fiber_stack_bytes() {
  static size_t bytes = [] {
    const char* env = getenv("WARP_DRIVE_CPU_STACK_KB");
    long kb = env ? atol(env) : 128;
    if (kb < 16) kb = 16;
    size_t b = (size_t)kb * 1024;
    return (b + page_size() - 1) / page_size() * page_size();
  }();
  return bytes;
}

struct Fiber {
  enum State { IDLE, RUNNING, AT_BARRIER, DONE };
  char* stack_low = nullptr;  // usable stack: [stack_low, stack_low + size)
  size_t size = 0;
  void* sp = nullptr;
#if !defined(__x86_64__)
  ucontext_t context;
#endif
  State state = IDLE;
  const char* site_file = nullptr;
  int site_line = 0;
  int predicate = 0;
  int barrier_result = 0;

  void allocate() {
    size = fiber_stack_bytes();
    size_t total = size + page_size();  // + a guard page: overflow faults instead of corrupting
    void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
      fprintf(stderr, "warp_drive cpu executor: cannot map a %zu-byte fiber stack: %s\n", total, strerror(errno));
      abort();
    }
    mprotect(mem, page_size(), PROT_NONE);
    stack_low = (char*)mem + page_size();
  }
};

struct Job;

struct Worker {
  // A deque: growing it never moves existing fibers, and a fiber waiting at a
  // barrier holds a reference to its own slot while the block adds fibers.
  std::deque<Fiber> fibers;
  void* scheduler_sp = nullptr;
#if !defined(__x86_64__)
  ucontext_t scheduler_context;
#endif
#if defined(WD_ASAN)
  void* asan_fake_stack = nullptr;
  const void* scheduler_stack_bottom = nullptr;
  size_t scheduler_stack_size = 0;
#endif
  Job* job = nullptr;
  wd_thread_index index{};
  unsigned int current = 0;
  bool plain_mode = false;
  bool failed = false;
  jmp_buf plain_abort;

  ~Worker() {
    for (Fiber& f : fibers) munmap(f.stack_low - page_size(), f.size + page_size());
  }

  void ensure_fibers(size_t n) {
    if (fibers.size() >= n) return;
    size_t old = fibers.size();
    fibers.resize(n);
    for (size_t i = old; i < n; ++i) fibers[i].allocate();
  }
};

thread_local Worker* tl_worker = nullptr;

// ------------------------------------------------------------------ jobs
struct Job {
  const char* kernel = "";
  wd_thread_fn fn = nullptr;
  wd_threads_fn threads_fn = nullptr;
  void* const* args = nullptr;
  dim3 grid{1, 1, 1}, block{1, 1, 1};
  std::atomic<uint64_t> total_blocks{0};
  std::atomic<uint64_t> done_blocks{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error;
};

std::atomic<unsigned long long> stat_launches{0}, stat_fiber_blocks{0}, stat_plain_blocks{0};

void describe_dim(char* out, size_t n, dim3 d) { snprintf(out, n, "(%u,%u,%u)", d.x, d.y, d.z); }

void report(Worker* w, const char* fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  char block[64];
  describe_dim(block, sizeof block, w->index.block);
  std::lock_guard<std::mutex> lock(w->job->error_mutex);
  if (!w->job->failed.exchange(true)) {
    w->job->error = std::string("kernel ") + w->job->kernel + ", block " + block + ": " + message;
  }
}

void set_thread(Worker* w, unsigned int t) {
  const dim3& b = w->job->block;
  w->current = t;
  // 1-D blocks (the usual case: one thread per agent) need no division; the
  // three divisions cost more than the rest of a fiber switch.
  w->index.thread = b.y == 1 && b.z == 1 ? dim3{t, 0, 0} : dim3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
}

// The fast path: threads 1..n-1 as plain calls, in one call into the kernel
// library, which advances w->index.thread as it goes.
void run_plain_threads(Worker* w, unsigned int n) {
  if (n < 2) return;
  set_thread(w, 1);
  w->job->threads_fn(w->job->args, &w->index, n - 1);
}

unsigned int linear_thread(const Worker* w) {
  const dim3& t = w->index.thread;
  const dim3& b = w->job->block;
  return t.x + b.x * (t.y + b.y * t.z);
}

// Enter a fiber from the scheduler and come back when it yields or finishes.
void switch_to_fiber(Worker* w, unsigned int t) {
  Fiber& f = w->fibers[t];
  set_thread(w, t);
  f.state = Fiber::RUNNING;
#if defined(WD_ASAN)
  __sanitizer_start_switch_fiber(&w->asan_fake_stack, f.stack_low, f.size);
#endif
#if defined(__x86_64__)
  wd_fiber_switch(&w->scheduler_sp, f.sp);
#else
  swapcontext(&w->scheduler_context, &f.context);
#endif
#if defined(WD_ASAN)
  __sanitizer_finish_switch_fiber(w->asan_fake_stack, nullptr, nullptr);
#endif
}

// Leave the running fiber for the scheduler.
void yield_to_scheduler(Worker* w, Fiber& f) {
#if defined(WD_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(f.state == Fiber::DONE ? nullptr : &fake, w->scheduler_stack_bottom,
                                 w->scheduler_stack_size);
#endif
#if defined(__x86_64__)
  wd_fiber_switch(&f.sp, w->scheduler_sp);
#else
  swapcontext(&f.context, &w->scheduler_context);
#endif
#if defined(WD_ASAN)
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

extern "C" void wd_fiber_main(void* arg) {
  Worker* w = static_cast<Worker*>(arg);
#if defined(WD_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &w->scheduler_stack_bottom, &w->scheduler_stack_size);
#endif
  unsigned int t = w->current;
  w->job->fn(w->job->args, &w->index);
  Fiber& f = w->fibers[t];
  f.state = Fiber::DONE;
  yield_to_scheduler(w, f);
  __builtin_unreachable();
}

#if !defined(__x86_64__)
void fiber_main_ucontext(unsigned int hi, unsigned int lo) {
  wd_fiber_main(reinterpret_cast<void*>(((uintptr_t)hi << 32) | lo));
}
#endif

void start_fiber(Worker* w, unsigned int t) {
  Fiber& f = w->fibers[t];
#if defined(WD_ASAN)
  // A reused stack still carries the redzones of the frames its last thread
  // left behind (finished or abandoned fibers never unwind).
  ASAN_UNPOISON_MEMORY_REGION(f.stack_low, f.size);
#endif
#if defined(__x86_64__)
  // Frame popped by wd_fiber_switch: r15 r14 r13 r12 rbx rbp, then `ret` into
  // the trampoline, which calls r13(r12) with a 16-byte aligned stack.
  uintptr_t top = ((uintptr_t)(f.stack_low + f.size)) & ~(uintptr_t)15;
  void** sp = reinterpret_cast<void**>(top - 72);
  sp[0] = nullptr;                                         // r15
  sp[1] = nullptr;                                         // r14
  sp[2] = reinterpret_cast<void*>(&wd_fiber_main);         // r13
  sp[3] = w;                                               // r12
  sp[4] = nullptr;                                         // rbx
  sp[5] = nullptr;                                         // rbp
  sp[6] = reinterpret_cast<void*>(&wd_fiber_trampoline);  // return address
  f.sp = sp;
#else
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack_low;
  f.context.uc_stack.ss_size = f.size;
  f.context.uc_link = nullptr;
  uintptr_t p = reinterpret_cast<uintptr_t>(w);
  makecontext(&f.context, (void (*)())fiber_main_ucontext, 2, (unsigned int)(p >> 32), (unsigned int)p);
#endif
  switch_to_fiber(w, t);
}

void thread_name(char* out, size_t n, Worker* w, unsigned int t) {
  const dim3& b = w->job->block;
  describe_dim(out, n, dim3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)});
}

// All live threads wait at a barrier: check they agree, then release them.
bool check_barrier(Worker* w, unsigned int n, int* predicate_sum) {
  int exited = -1, first = -1;
  *predicate_sum = 0;
  for (unsigned int t = 0; t < n; ++t) {
    Fiber& f = w->fibers[t];
    if (f.state == Fiber::DONE) {
      if (exited < 0) exited = (int)t;
      continue;
    }
    *predicate_sum += f.predicate;
    if (first < 0) {
      first = (int)t;
    } else if (f.site_line != w->fibers[first].site_line ||
               (f.site_file != w->fibers[first].site_file && strcmp(f.site_file, w->fibers[first].site_file) != 0)) {
      char a[64], b[64];
      thread_name(a, sizeof a, w, first);
      thread_name(b, sizeof b, w, t);
      report(w, "divergent barrier: thread %s waits at __syncthreads() %s:%d while thread %s waits at %s:%d",
             a, w->fibers[first].site_file, w->fibers[first].site_line, b, f.site_file, f.site_line);
      return false;
    }
  }
  if (first >= 0 && exited >= 0) {
    char a[64], b[64];
    thread_name(a, sizeof a, w, first);
    thread_name(b, sizeof b, w, exited);
    report(w, "divergent barrier: thread %s waits at __syncthreads() %s:%d but thread %s has exited without reaching it",
           a, w->fibers[first].site_file, w->fibers[first].site_line, b);
    return false;
  }
  return true;
}

void run_block(Worker* w, uint64_t linear) {
  Job* job = w->job;
  const dim3 g = job->grid, b = job->block;
  w->index.block = dim3{(unsigned)(linear % g.x), (unsigned)((linear / g.x) % g.y), (unsigned)(linear / ((uint64_t)g.x * g.y))};
  w->index.block_dim = b;
  w->index.grid_dim = g;
  const unsigned int n = b.x * b.y * b.z;
  w->failed = false;
  w->plain_mode = false;
  w->index.block_changed = 1;

  if (n == 1) {
    // One thread: its barriers return at once (the emulation header), so it
    // runs as a plain call on this worker's own stack, with no fiber at all.
    stat_plain_blocks.fetch_add(1, std::memory_order_relaxed);
    w->plain_mode = true;
    if (setjmp(w->plain_abort) == 0) {
      set_thread(w, 0);
      job->fn(job->args, &w->index);
    }
    w->plain_mode = false;
    w->index.block_changed = 0;
    return;
  }
  w->ensure_fibers(1);
  start_fiber(w, 0);
  w->index.block_changed = 0;
  if (w->failed) return;
  if (w->fibers[0].state == Fiber::DONE) {
    stat_plain_blocks.fetch_add(1, std::memory_order_relaxed);
    w->plain_mode = true;
    if (setjmp(w->plain_abort) != 0) {
      w->plain_mode = false;
      return;  // the error is recorded; the rest of the block is abandoned
    }
    run_plain_threads(w, n);
    w->plain_mode = false;
    return;
  }

  stat_fiber_blocks.fetch_add(1, std::memory_order_relaxed);
  w->ensure_fibers(n);
  for (unsigned int t = 1; t < n; ++t) {
    start_fiber(w, t);
    if (w->failed) return;
  }
  for (;;) {
    int predicate_sum = 0;
    if (!check_barrier(w, n, &predicate_sum)) return;
    bool any_waiting = false;
    for (unsigned int t = 0; t < n; ++t) {
      Fiber& f = w->fibers[t];
      if (f.state != Fiber::AT_BARRIER) continue;
      any_waiting = true;
      f.barrier_result = predicate_sum;
      switch_to_fiber(w, t);
      if (w->failed) return;
    }
    if (!any_waiting) return;
  }
}

// ------------------------------------------------------------------ pool
void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

Worker& this_thread_worker() {
  thread_local Worker worker;
  tl_worker = &worker;
  return worker;
}

class Pool {
 public:
  explicit Pool(int workers) : n_threads_(workers < 1 ? 1 : workers) {
    // Workers start from the sequence as it is now, read before they run: a
    // pool destroyed before a worker got scheduled still wakes it.
    const uint32_t start = sequence_.load();
    for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, start] { worker_main(start); });
  }
  ~Pool() {
    stopping_.store(true);
    sequence_.fetch_add(1, std::memory_order_release);
    sequence_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return n_threads_; }

  int launch(Job& job_args) {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    Job& job = job_;
    job.kernel = job_args.kernel;
    job.fn = job_args.fn;
    job.threads_fn = job_args.threads_fn;
    job.args = job_args.args;
    job.grid = job_args.grid;
    job.block = job_args.block;
    uint64_t total = job_args.total_blocks.load();
    job.total_blocks.store(total, std::memory_order_relaxed);
    job.done_blocks.store(0, std::memory_order_relaxed);
    job.failed.store(false, std::memory_order_relaxed);
    job.error.clear();

    Worker& me = this_thread_worker();
    if (total == 1 || n_threads_ == 1) {
      me.job = &job;
      for (uint64_t b = 0; b < total && !job.failed.load(std::memory_order_relaxed); ++b) run_block(&me, b);
      return finish(job_args);
    }
    uint32_t seq = sequence_.load(std::memory_order_relaxed) + 1;
    ticket_.store((uint64_t)seq << 32, std::memory_order_release);
    sequence_.store(seq, std::memory_order_release);
    sequence_.notify_all();
    me.job = &job;
    uint64_t block;
    while (grab(seq, &block)) {
      run_block(&me, block);
      job.done_blocks.fetch_add(1, std::memory_order_acq_rel);
    }
    // Close the launch, then wait for the blocks other workers still run.
    uint64_t last = ticket_.exchange(((uint64_t)seq << 32) | 0xffffffffu, std::memory_order_acq_rel);
    uint64_t claimed = (uint32_t)last;
    if (claimed > total) claimed = total;
    while (job.done_blocks.load(std::memory_order_acquire) < claimed) cpu_relax();
    return finish(job_args);
  }

 private:
  int finish(Job& out) {
    if (job_.failed.load()) {
      out.error = job_.error;
      return 1;
    }
    return 0;
  }

  bool grab(uint32_t seq, uint64_t* block) {
    uint64_t v = ticket_.load(std::memory_order_acquire);
    for (;;) {
      if ((uint32_t)(v >> 32) != seq) return false;
      uint64_t b = (uint32_t)v;
      if (b >= job_.total_blocks.load(std::memory_order_relaxed) || job_.failed.load(std::memory_order_relaxed))
        return false;
      if (ticket_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) {
        *block = b;
        return true;
      }
    }
  }

  void worker_main(uint32_t seen) {
    Worker& me = this_thread_worker();
    for (;;) {
      // Spin briefly (launches come back to back in a step loop), then sleep.
      uint32_t seq = sequence_.load(std::memory_order_acquire);
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; seq == seen; ++i) {
        cpu_relax();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > std::chrono::microseconds(50)) {
          sequence_.wait(seen, std::memory_order_acquire);
        }
        seq = sequence_.load(std::memory_order_acquire);
      }
      seen = seq;
      if (stopping_.load()) return;
      me.job = &job_;
      uint64_t block;
      while (grab(seq, &block)) {
        run_block(&me, block);
        job_.done_blocks.fetch_add(1, std::memory_order_acq_rel);
      }
    }
  }

  int n_threads_;
  std::vector<std::thread> threads_;
  std::atomic<uint32_t> sequence_{0};
  std::atomic<uint64_t> ticket_{0};
  std::atomic<bool> stopping_{false};
  std::mutex launch_mutex_;
  Job job_;
};

std::mutex pool_mutex;
Pool* pool = nullptr;

int default_workers() {
  const char* env = getenv("WARP_DRIVE_CPU_THREADS");
  if (env && atoi(env) > 0) return atoi(env);
  unsigned int n = std::thread::hardware_concurrency();
  return n ? (int)n : 1;
}

Pool& get_pool() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (!pool) pool = new Pool(default_workers());
  return *pool;
}

}  // namespace

// ------------------------------------------------------------------ C API
// Called by kernel code (through the emulation header).
WD_EXPORT int wd_cpu_barrier(const char* file, int line, int predicate) {
  Worker* w = tl_worker;
  if (w->plain_mode) {
    char me[64];
    thread_name(me, sizeof me, w, linear_thread(w));
    w->failed = true;
    report(w,
           "divergent barrier: thread %s reached __syncthreads() at %s:%d after thread (0,0,0) had exited without "
           "reaching any barrier (every thread of a block must reach the same barriers)",
           me, file, line);
    longjmp(w->plain_abort, 1);
  }
  Fiber& f = w->fibers[w->current];
  f.state = Fiber::AT_BARRIER;
  f.site_file = file;
  f.site_line = line;
  f.predicate = predicate;
  yield_to_scheduler(w, f);
  return f.barrier_result;
}

WD_EXPORT void wd_cpu_device_fail(const char* what, const char* file, int line) {
  Worker* w = tl_worker;
  char me[64];
  thread_name(me, sizeof me, w, w->plain_mode ? linear_thread(w) : w->current);
  report(w, "thread %s: device assertion `%s` failed at %s:%d", me, what, file, line);
  w->failed = true;
  if (w->plain_mode) longjmp(w->plain_abort, 1);
  Fiber& f = w->fibers[w->current];
  f.state = Fiber::DONE;
  yield_to_scheduler(w, f);  // never resumed: the block is abandoned
  __builtin_unreachable();
}

// Launch `fn` over grid x block; returns 0, or 1 with a message in `error`.
WD_EXPORT int wd_cpu_launch(const char* kernel, wd_thread_fn fn, wd_threads_fn threads_fn, void* const* args,
                            const unsigned int* grid, const unsigned int* block, char* error, int error_size) {
  Job job;
  job.kernel = kernel;
  job.fn = fn;
  job.threads_fn = threads_fn;
  job.args = args;
  job.grid = dim3{grid[0], grid[1], grid[2]};
  job.block = dim3{block[0], block[1], block[2]};
  uint64_t total = (uint64_t)grid[0] * grid[1] * grid[2];
  uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  if (total == 0 || threads == 0 || total >= 0xffffffffull || threads >= 0xffffffffull) {
    snprintf(error, error_size, "kernel %s: invalid launch geometry", kernel);
    return 1;
  }
  job.total_blocks.store(total);
  stat_launches.fetch_add(1, std::memory_order_relaxed);
  int rc = get_pool().launch(job);
  fflush(stdout);  // device printf output appears when the launch returns
  if (rc != 0) snprintf(error, error_size, "%s", job.error.c_str());
  return rc;
}

WD_EXPORT int wd_cpu_num_workers() { return get_pool().size(); }

WD_EXPORT void wd_cpu_set_num_workers(int n) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  delete pool;
  pool = new Pool(n > 0 ? n : default_workers());
}

// {launches, blocks run with fibers, blocks run on the plain fast path}
WD_EXPORT void wd_cpu_stats(unsigned long long* out) {
  out[0] = stat_launches.load();
  out[1] = stat_fiber_blocks.load();
  out[2] = stat_plain_blocks.load();
}
