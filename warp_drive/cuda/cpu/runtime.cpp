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
//   * Interrupts (x86-64, not under ASan): a SIGINT handler, chained in front of
//     Python's, sets a cancel flag that workers check at every block boundary
//     and barrier, and, when it lands on the launching thread while that thread
//     runs kernel code, abandons that thread's block at once (longjmp / fiber
//     switch back to the scheduler), so the launch returns and Python raises
//     KeyboardInterrupt. Blocks other workers run in a loop with no barrier
//     cannot be stopped: after a short grace the launch returns anyway, and the
//     executor refuses launches (naming the kernel) until those blocks return.
//     Kernel code interrupted inside a C library call is not abandoned there
//     (it may hold libc's locks); it stops at its next barrier, or, for device
//     printf (the emulation header's, which calls wd_cpu_poll_interrupt after
//     libc's), as the call returns -- on any worker.
//   * Faults in kernel code (x86-64, not under a sanitizer): an integer division
//     by zero (SIGFPE), a bus error (SIGBUS) or an access outside every mapping
//     (SIGSEGV) while a thread runs kernel code abandons its block, and the
//     launch fails naming the kernel, block, thread, the faulting address and
//     the code's address (Python turns it into file:line). After a SIGSEGV or
//     SIGBUS the executor refuses further launches: the kernel may have written
//     anywhere before it faulted (a CUDA context is unusable after an illegal
//     address too). Faults outside kernel code go to the handlers there before.
//   * A fiber that runs past its stack hits a guard page; a SIGSEGV handler on
//     an alternate signal stack recognises that page, abandons the block and
//     the launch fails naming the kernel and WARP_DRIVE_CPU_STACK_KB. Fibers
//     take two memory maps each; a block needing more fibers than the process
//     may map (vm.max_map_count) or more stack than the machine has is refused
//     with a clear error before its fibers are allocated.
//   * Shuffle (any build; wd_cpu_set_shuffle): the threads of a block start,
//     and resume after every barrier, in a seeded random order drawn per
//     (launch, block, phase), so a result that depends on the order threads
//     run in shows up as a difference between seeds.
//   * Race mode (built with -DWD_RACE, kernels with -fsanitize=thread, Python
//     started with libtsan preloaded): every CUDA thread runs on a fiber (no
//     fast path) that is a fresh ThreadSanitizer fiber per block, so TSan sees
//     each CUDA thread as a thread of its own. Fiber switches carry no
//     synchronisation; what does is stated to TSan explicitly: a barrier is a
//     release by every arriving thread and an acquire by every leaving one (on
//     one of two per-block sync objects, alternating by phase, fresh per
//     block); a launch is a release by the launcher that every worker acquires
//     before its blocks, and a release by every finished thread that the
//     launcher acquires when the launch returns. Blocks of one launch get no
//     ordering from each other, even on one worker (the scheduler never
//     acquires from its fibers), as on a GPU. Each block runs on a new OS
//     thread, so the memory a GPU gives each block fresh -- the threads'
//     stacks, the kernel library's thread_locals (`__shared__`) -- is new
//     memory to TSan (see race_block_begin).
//     The runtime itself is not instrumented: its bookkeeping between the
//     scheduler and its fibers is not a race of the kernel's.
#undef _FORTIFY_SOURCE  // longjmp out of signal handlers across stacks, on purpose
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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

#include <ucontext.h>

#if defined(WD_RACE)
// ThreadSanitizer's fiber and annotation interface (libtsan, preloaded).
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
void __tsan_set_fiber_name(void* fiber, const char* name);
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void* __tls_get_addr(void* index);
}
constexpr unsigned kTsanNoSync = 1;  // __tsan_switch_to_fiber_no_sync: a switch is not a synchronisation
constexpr bool kRace = true;
#else
constexpr bool kRace = false;
#endif

#if defined(__x86_64__) && !defined(WD_ASAN) && !defined(WD_RACE)
#define WD_CAN_ESCAPE 1  // signal handlers may leave kernel code (see the top of this file)
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

long stack_kb_setting() {
  const char* env = getenv("WARP_DRIVE_CPU_STACK_KB");
  return env ? atol(env) : 128;
}

// Fibers of all workers together: each is an mmap split in two by its guard page.
std::atomic<long> fibers_mapped{0};

long max_map_count() {
  static long value = [] {
    long v = 65530;
    if (FILE* f = fopen("/proc/sys/vm/max_map_count", "r")) {
      if (fscanf(f, "%ld", &v) != 1) v = 65530;
      fclose(f);
    }
    return v;
  }();
  return value;
}

// How many fibers this process may hold: a quarter of the map budget is left
// to everything else (Python, torch, libraries), and their stacks together may
// not exceed the machine's memory.
long fiber_budget() {
  long by_maps = max_map_count() * 3 / 4 / 2;
  long pages = sysconf(_SC_PHYS_PAGES);
  long by_memory = pages > 0 ? (long)((double)pages * (double)page_size() / (double)(fiber_stack_bytes() + page_size()))
                             : by_maps;
  return by_maps < by_memory ? by_maps : by_memory;
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
#if defined(WD_RACE)
  void* tsan = nullptr;  // this CUDA thread's TSan fiber (fresh per block)
  unsigned int phase = 0;  // barriers passed in this block
#endif
  const char* site_file = nullptr;
  int site_line = 0;
  int predicate = 0;
  int barrier_result = 0;

  bool allocate() {
    size = fiber_stack_bytes();
    size_t total = size + page_size();  // + a guard page: overflow faults instead of corrupting
    void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return false;
    if (mprotect(mem, page_size(), PROT_NONE) != 0) {
      munmap(mem, total);
      return false;
    }
    stack_low = (char*)mem + page_size();
    fibers_mapped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
};

// Threads known to the signal handlers, found by kernel thread id (no TLS in
// a handler: a thread that never used this library has no block for it yet).
struct Worker;
constexpr int kMaxRegistered = 1024;
std::atomic<long> registered_tid[kMaxRegistered];
std::atomic<Worker*> registered_worker[kMaxRegistered];

long current_tid() { return syscall(SYS_gettid); }

Worker* find_worker(long tid) {
  for (int i = 0; i < kMaxRegistered; ++i)
    if (registered_tid[i].load(std::memory_order_acquire) == tid) return registered_worker[i].load();
  return nullptr;
}

std::atomic<int> interrupt_requested{0};  // set by SIGINT; cleared when a launch starts
std::atomic<long> launching_tid{0};      // the thread inside wd_cpu_launch, 0 when none
std::atomic<int> last_status{0};         // what the last launch returned

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
  std::vector<unsigned int> order;  // the order threads run in, when shuffled
#if defined(WD_RACE)
  void* tsan_self = nullptr;     // the scheduler's own TSan fiber (this OS thread's)
  char* block_sync = nullptr;    // two per-block barrier sync objects (fresh memory per block)
#endif
  wd_thread_index index{};
  unsigned int current = 0;
  volatile bool plain_mode = false;
  volatile bool failed = false;
  jmp_buf plain_abort;
  // Set while this thread runs kernel code (not the runtime's own), read by
  // the signal handlers on this same thread.
  volatile sig_atomic_t in_kernel = 0;
  volatile sig_atomic_t on_fiber = 0;  // a fiber (not the scheduler) runs on this thread
  // What a signal handler did, reported (it may not allocate) once back here.
  enum Event { NONE, INTERRUPTED, STACK_OVERFLOW, FAULT };
  volatile sig_atomic_t event = NONE;
  unsigned int event_thread = 0;
  int fault_signal = 0, fault_code = 0;  // a FAULT event: the signal, its si_code
  void* fault_address = nullptr;          // the memory address (SIGSEGV/SIGBUS)
  void* fault_pc = nullptr;               // the faulting instruction
  long tid = 0;
  int slot = -1;
  void* altstack = nullptr;
  size_t altstack_size = 0;

  Worker() {
    tid = current_tid();
    for (int i = 0; i < kMaxRegistered; ++i) {
      long expected = 0;
      if (registered_tid[i].compare_exchange_strong(expected, -1)) {  // claimed, not yet visible
        registered_worker[i].store(this);
        registered_tid[i].store(tid, std::memory_order_release);
        slot = i;
        break;
      }
    }
    // The guard-page handler needs a stack of its own when a fiber's is used up.
    stack_t current{};
    if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE)) {
      altstack_size = 64 * 1024;
      void* mem = mmap(nullptr, altstack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (mem != MAP_FAILED) {
        stack_t mine{};
        mine.ss_sp = mem;
        mine.ss_size = altstack_size;
        if (sigaltstack(&mine, nullptr) == 0) altstack = mem;
        else munmap(mem, altstack_size);
      }
    }
  }

  ~Worker() {
    if (slot >= 0) registered_tid[slot].store(0, std::memory_order_release);
    for (Fiber& f : fibers) {
      munmap(f.stack_low - page_size(), f.size + page_size());
      fibers_mapped.fetch_sub(1, std::memory_order_relaxed);
    }
    if (altstack) {
      stack_t off{};
      off.ss_flags = SS_DISABLE;
      sigaltstack(&off, nullptr);
      munmap(altstack, altstack_size);
    }
  }

  // False (with the reason in `why`) when the fibers cannot be had.
  bool ensure_fibers(size_t n, char* why, size_t why_size) {
    if (fibers.size() >= n) return true;
    size_t old = fibers.size();
    long budget = fiber_budget();
    if (fibers_mapped.load(std::memory_order_relaxed) + (long)(n - old) > budget) {
      long by_maps = max_map_count() * 3 / 4 / 2;
      char limit[192];
      if (budget >= by_maps)
        snprintf(limit, sizeof limit, "two memory maps each, and vm.max_map_count=%ld allows this process at most %ld "
                 "fibers; raise vm.max_map_count, or use smaller blocks or fewer workers (each keeps its own fibers)",
                 max_map_count(), budget);
      else
        snprintf(limit, sizeof limit, "the machine's memory holds at most %ld such stacks; use smaller blocks, fewer "
                 "workers, or a lower WARP_DRIVE_CPU_STACK_KB", budget);
      snprintf(why, why_size,
               "a block of %zu threads that reaches __syncthreads() runs each thread on a fiber of its own (a %zu KiB "
               "stack, WARP_DRIVE_CPU_STACK_KB=%ld, + a guard page), %ld fibers already in use: %s",
               n, fiber_stack_bytes() / 1024, stack_kb_setting(), (long)fibers_mapped.load(), limit);
      return false;
    }
    fibers.resize(n);
    for (size_t i = old; i < n; ++i) {
      if (!fibers[i].allocate()) {
        int err = errno;
        fibers.resize(i);
        snprintf(why, why_size,
                 "cannot map fiber stack %zu of a block of %zu threads (%zu KiB each, WARP_DRIVE_CPU_STACK_KB=%ld): "
                 "%s; use smaller blocks or lower WARP_DRIVE_CPU_STACK_KB",
                 i, n, fiber_stack_bytes() / 1024, stack_kb_setting(), strerror(err));
        return false;
      }
    }
    return true;
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
  uint64_t chunk = 1;  // consecutive blocks a worker claims at once (Pool::launch sets it)
  uint64_t launch_index = 0;  // launches before this one in the process (seeds the shuffle)
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error;
};

std::atomic<unsigned long long> stat_launches{0}, stat_fiber_blocks{0}, stat_plain_blocks{0};

// The shuffle (see the top of this file): off unless wd_cpu_set_shuffle turned it on.
std::atomic<bool> shuffle_on{false};
std::atomic<uint64_t> shuffle_seed{0};

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A permutation of 0..n-1 in `order`, drawn from `state` (Fisher-Yates).
void shuffled_order(std::vector<unsigned int>& order, unsigned int n, uint64_t& state) {
  order.resize(n);
  for (unsigned int i = 0; i < n; ++i) order[i] = i;
  for (unsigned int i = n; i > 1; --i) std::swap(order[i - 1], order[splitmix64(state) % i]);
}

#if defined(WD_RACE)
// TSan sync objects of launches: the launcher releases `launch_start` before a
// launch's blocks run and every worker acquires it; every finished CUDA
// thread releases `launch_done` and the launcher acquires it at the end.
char launch_start_sync, launch_done_sync;
#endif

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

// Kernel code starts (or resumes) on this thread. A SIGINT that came while the
// runtime's own code ran (the handler left it alone) is honoured here, so the
// launching thread never enters an endless kernel after Ctrl-C. True when the
// kernel may run.
inline bool enter_kernel(Worker* w) {
  w->in_kernel = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (__builtin_expect(interrupt_requested.load(std::memory_order_relaxed) != 0, 0)) {
    w->in_kernel = 0;
    return false;
  }
  return true;
}

inline void leave_kernel(Worker* w) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  w->in_kernel = 0;
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
  if (!enter_kernel(w)) {
    w->failed = true;
    return;
  }
  w->job->threads_fn(w->job->args, &w->index, n - 1);
  leave_kernel(w);
}

unsigned int linear_thread(const Worker* w) {
  const dim3& t = w->index.thread;
  const dim3& b = w->job->block;
  return t.x + b.x * (t.y + b.y * t.z);
}

void thread_name(char* out, size_t n, Worker* w, unsigned int t);

std::atomic<bool> poisoned{false};  // a kernel faulted on memory: no more launches in this process
char poisoned_by[320] = "";

// "in <library>+0x<offset>" of a code address, which Python resolves to file:line.
void describe_pc(char* out, size_t n, void* pc) {
  Dl_info info;
  if (dladdr(pc, &info) && info.dli_fname && info.dli_fbase)
    snprintf(out, n, "[pc %s+0x%lx]", info.dli_fname, (unsigned long)((char*)pc - (char*)info.dli_fbase));
  else
    snprintf(out, n, "[pc %p]", pc);
}

void describe_fault(Worker* w, const char* me) {
  char where[PATH_MAX + 64];
  describe_pc(where, sizeof where, w->fault_pc);
  if (w->fault_signal == SIGFPE) {
    const char* what = w->fault_code == FPE_INTDIV ? "integer division by zero"
                       : w->fault_code == FPE_INTOVF ? "integer overflow (INT_MIN / -1)"
                                                     : "arithmetic fault";
    report(w, "thread %s: %s (SIGFPE) at %s; on a GPU it gives an undefined value instead of stopping -- guard the "
           "divisor", me, what, where);
    return;
  }
  const char* what = w->fault_signal == SIGBUS ? "bus error (SIGBUS: misaligned or truncated memory)"
                                               : "invalid memory access (SIGSEGV: no memory at that address)";
  report(w, "thread %s: %s at address %p, at %s -- an index past the end of an array, or a bad pointer; the "
         "cpu executor refuses further launches in this process (the kernel may have written out of bounds before), "
         "as a CUDA context does after an illegal address: fix the kernel or its inputs and restart", me, what,
         w->fault_address, where);
  snprintf(poisoned_by, sizeof poisoned_by, "kernel %s faulted (%s) in an earlier launch", w->job->kernel,
           w->fault_signal == SIGBUS ? "SIGBUS" : "SIGSEGV");
  poisoned.store(true);
}

// What a signal handler did on this thread, reported now that allocating is safe.
void report_event(Worker* w) {
  int event = w->event;
  if (event == Worker::NONE) return;
  w->event = Worker::NONE;
  char me[64];
  thread_name(me, sizeof me, w, w->event_thread);
  if (event == Worker::FAULT) {
    describe_fault(w, me);
  } else if (event == Worker::STACK_OVERFLOW) {
    report(w,
           "thread %s overflowed its fiber stack of %zu KiB (it hit the guard page below the stack): the kernel's "
           "local variables and calls need more stack per thread; set WARP_DRIVE_CPU_STACK_KB to more than %ld "
           "(read once, before the cpu executor's first launch in the process)",
           me, fiber_stack_bytes() / 1024, stack_kb_setting() < 16 ? 16 : stack_kb_setting());
  } else {
    report(w, "interrupted by SIGINT (Ctrl-C) while thread %s ran kernel code; the launch did not complete", me);
  }
}

// Enter a fiber from the scheduler and come back when it yields or finishes.
void switch_to_fiber(Worker* w, unsigned int t) {
  Fiber& f = w->fibers[t];
  set_thread(w, t);
  f.state = Fiber::RUNNING;
#if defined(WD_ASAN)
  __sanitizer_start_switch_fiber(&w->asan_fake_stack, f.stack_low, f.size);
#endif
  w->on_fiber = 1;
#if defined(WD_RACE)
  __tsan_switch_to_fiber(f.tsan, kTsanNoSync);
#endif
#if defined(__x86_64__)
  wd_fiber_switch(&w->scheduler_sp, f.sp);
#else
  swapcontext(&w->scheduler_context, &f.context);
#endif
  w->on_fiber = 0;
#if defined(WD_ASAN)
  __sanitizer_finish_switch_fiber(w->asan_fake_stack, nullptr, nullptr);
#endif
  if (w->event != Worker::NONE) report_event(w);
}



// Leave the running fiber for the scheduler.
void yield_to_scheduler(Worker* w, Fiber& f);

// The current fiber gives up: the block is abandoned (never resumed).
[[noreturn]] void abandon_fiber(Worker* w, int event) {
  w->event = event;
  w->event_thread = w->current;
  w->failed = true;
  Fiber& f = w->fibers[w->current];
  f.state = Fiber::DONE;
  yield_to_scheduler(w, f);
  __builtin_unreachable();
}

void yield_to_scheduler(Worker* w, Fiber& f) {
#if defined(WD_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(f.state == Fiber::DONE ? nullptr : &fake, w->scheduler_stack_bottom,
                                 w->scheduler_stack_size);
#endif
#if defined(WD_RACE)
  __tsan_switch_to_fiber(w->tsan_self, kTsanNoSync);
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
  if (!enter_kernel(w)) abandon_fiber(w, Worker::INTERRUPTED);
  w->job->fn(w->job->args, &w->index);
  leave_kernel(w);
#if defined(WD_RACE)
  __tsan_release(&launch_done_sync);
#endif
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
#if defined(WD_RACE)
  // A new CUDA thread: a fresh TSan fiber that knows what the scheduler knows (the launch start).
  f.tsan = __tsan_create_fiber(0);
  f.phase = 0;
  char name[96], block[40], thread[40];
  describe_dim(block, sizeof block, w->index.block);
  thread_name(thread, sizeof thread, w, t);
  snprintf(name, sizeof name, "block %s thread %s", block, thread);
  __tsan_set_fiber_name(f.tsan, name);
#endif
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

#if defined(WD_RACE)
// Memory a GPU gives each block fresh -- shared memory (the kernel library's
// thread_locals here) and the threads' stacks -- must look fresh to TSan too,
// or the next block's threads would "race" with the last block's. gcc's
// libtsan cannot forget a range (AnnotateNewMemory is a no-op in it), so each
// block runs on an OS thread of its own: its fiber stacks are new mappings and
// its TLS block a new allocation, which TSan sees as written by that thread
// before it creates the block's fibers. The TLS block is allocated here, by the
// block's scheduler, so that no CUDA thread's fiber "writes" it first.
struct TlsModule {
  void* base;
  size_t modid, size;
};
std::mutex tls_modules_mutex;
std::vector<TlsModule> tls_modules;

int find_tls_size(struct dl_phdr_info* info, size_t, void* data) {
  TlsModule* m = static_cast<TlsModule*>(data);
  if ((void*)info->dlpi_addr != m->base || info->dlpi_tls_modid != m->modid) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_TLS) m->size = info->dlpi_phdr[i].p_memsz;
  return 1;
}

TlsModule tls_module_of(void* fn) {
  std::lock_guard<std::mutex> lock(tls_modules_mutex);
  Dl_info info;
  if (!dladdr(fn, &info)) return TlsModule{nullptr, 0, 0};
  for (const TlsModule& m : tls_modules)
    if (m.base == info.dli_fbase) return m;
  TlsModule m{info.dli_fbase, 0, 0};
  if (void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
    struct link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_TLS_MODID, &m.modid) == 0 && m.modid != 0 && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0) {
      m.base = (void*)map->l_addr;
      dl_iterate_phdr(find_tls_size, &m);
      m.base = info.dli_fbase;
    }
    dlclose(handle);
  }
  tls_modules.push_back(m);
  return m;
}

void race_block_begin(Worker* w) {
  if (!w->tsan_self) w->tsan_self = __tsan_get_current_fiber();
  w->block_sync = static_cast<char*>(malloc(2));  // fresh: no ordering carried over from the last block
  TlsModule m = tls_module_of(reinterpret_cast<void*>(w->job->fn));
  if (m.modid != 0 && m.size != 0) {
    struct { unsigned long module, offset; } index{m.modid, 0};
    __tls_get_addr(&index);
  }
}

void race_block_end(Worker* w) {
  for (Fiber& f : w->fibers) {
    if (f.tsan) __tsan_destroy_fiber(f.tsan);
    f.tsan = nullptr;
  }
  free(w->block_sync);
  w->block_sync = nullptr;
}
#endif

// Run threads `order[from..]` of the block as plain calls, one at a time (the
// fast path when their order is shuffled).
void run_plain_in_order(Worker* w, unsigned int from) {
  for (unsigned int k = from; k < w->order.size(); ++k) {
    set_thread(w, w->order[k]);
    if (!enter_kernel(w)) {
      w->failed = true;
      return;
    }
    w->job->fn(w->job->args, &w->index);
    leave_kernel(w);
  }
}

void run_block_threads(Worker* w, uint64_t linear) {
  Job* job = w->job;
  const dim3 g = job->grid, b = job->block;
  w->index.block = dim3{(unsigned)(linear % g.x), (unsigned)((linear / g.x) % g.y), (unsigned)(linear / ((uint64_t)g.x * g.y))};
  w->index.block_dim = b;
  w->index.grid_dim = g;
  const unsigned int n = b.x * b.y * b.z;
  w->failed = false;
  w->plain_mode = false;
  w->index.block_changed = 1;

  if (n == 1 && !kRace) {
    // One thread: its barriers return at once (the emulation header), so it
    // runs as a plain call on this worker's own stack, with no fiber at all.
    stat_plain_blocks.fetch_add(1, std::memory_order_relaxed);
    w->plain_mode = true;
    if (setjmp(w->plain_abort) == 0) {
      set_thread(w, 0);
      if (enter_kernel(w)) {
        job->fn(job->args, &w->index);
        leave_kernel(w);
      } else {
        w->failed = true;
      }
    } else {
      w->in_kernel = 0;
      if (w->event != Worker::NONE) report_event(w);
    }
    w->plain_mode = false;
    w->index.block_changed = 0;
    return;
  }
  // The order threads start in, and resume in after each barrier: 0..n-1, or
  // a permutation drawn from (seed, launch, block) when shuffled.
  const bool shuffled = shuffle_on.load(std::memory_order_relaxed);
  uint64_t rng = shuffle_seed.load(std::memory_order_relaxed) ^ (job->launch_index * 0xD1B54A32D192ED03ull) ^
                 (linear * 0x8CB92BA72F3D8DD7ull);
  if (shuffled) shuffled_order(w->order, n, rng);
  auto nth = [&](unsigned int k) { return shuffled ? w->order[k] : k; };

  char why[768];
  // Fibers are indexed by thread: a shuffled block may start with any of them.
  if (!w->ensure_fibers(kRace || shuffled ? n : 1, why, sizeof why)) {
    report(w, "%s", why);
    w->failed = true;
    return;
  }
  start_fiber(w, nth(0));
  w->index.block_changed = 0;
  if (w->failed) return;
  if (!kRace && w->fibers[nth(0)].state == Fiber::DONE) {
    stat_plain_blocks.fetch_add(1, std::memory_order_relaxed);
    w->plain_mode = true;
    if (setjmp(w->plain_abort) != 0) {
      w->in_kernel = 0;
      w->plain_mode = false;
      if (w->event != Worker::NONE) report_event(w);
      return;  // the error is recorded; the rest of the block is abandoned
    }
    if (shuffled) run_plain_in_order(w, 1);
    else run_plain_threads(w, n);
    w->plain_mode = false;
    return;
  }

  stat_fiber_blocks.fetch_add(1, std::memory_order_relaxed);
  if (!w->ensure_fibers(n, why, sizeof why)) {
    report(w, "%s", why);
    w->failed = true;
    return;
  }
  for (unsigned int k = 1; k < n; ++k) {
    start_fiber(w, nth(k));
    if (w->failed) return;
  }
  for (;;) {
    int predicate_sum = 0;
    if (!check_barrier(w, n, &predicate_sum)) return;
    if (shuffled) shuffled_order(w->order, n, rng);
    bool any_waiting = false;
    for (unsigned int k = 0; k < n; ++k) {
      Fiber& f = w->fibers[nth(k)];
      if (f.state != Fiber::AT_BARRIER) continue;
      any_waiting = true;
      f.barrier_result = predicate_sum;
      switch_to_fiber(w, nth(k));
      if (w->failed) return;
    }
    if (!any_waiting) return;
  }
}

Worker& this_thread_worker();

void run_block(Worker* w, uint64_t linear) {
#if defined(WD_RACE)
  // A thread of its own per block (see race_block_begin), started by this
  // worker: it knows what the worker knows (the launch start), nothing more.
  Job* job = w->job;
  bool failed = false;
  std::thread block_thread([job, linear, &failed] {
    sigset_t interrupt;
    sigemptyset(&interrupt);
    sigaddset(&interrupt, SIGINT);
    pthread_sigmask(SIG_BLOCK, &interrupt, nullptr);
    Worker& me = this_thread_worker();
    me.job = job;
    race_block_begin(&me);
    run_block_threads(&me, linear);
    race_block_end(&me);
    failed = me.failed;
  });
  block_thread.join();
  w->failed = failed;
#else
  run_block_threads(w, linear);
#endif
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
  static constexpr uint64_t CHUNKS_PER_WORKER = 8;  // runs of blocks per worker and launch (balance vs sharing)

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
    if (abandoned_blocks_ != 0) {
      if (job_.done_blocks.load(std::memory_order_acquire) < abandoned_blocks_) {
        job_args.error = std::string("the cpu executor is unusable: an interrupted launch of kernel ") + abandoned_kernel_ +
                         " left blocks running kernel code on worker threads that cannot be stopped (a loop with no "
                         "__syncthreads() checks no interrupt); it accepts launches again once they return. Restart "
                         "the process to get it back now";
        return 1;
      }
      abandoned_blocks_ = 0;  // they returned: the pool is whole again
    }
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
    // Workers claim runs of consecutive blocks, about CHUNKS_PER_WORKER per worker: one block at a time,
    // neighbouring envs' blocks ran on different cores and wrote to the same cache lines (per-env
    // rewards, flags, counters), which made a 20,000-env step of one-thread blocks 1.9x slower on two
    // workers than on one; a run of blocks also costs one claim instead of many.
    job.chunk = std::max<uint64_t>(1, total / ((uint64_t)n_threads_ * CHUNKS_PER_WORKER));
    job.launch_index = job_args.launch_index;
#if defined(WD_RACE)
    __tsan_release(&launch_start_sync);
#endif

    Worker& me = this_thread_worker();
    if (total == 1 || n_threads_ == 1) {
      me.job = &job;
      for (uint64_t b = 0; b < total && !job.failed.load(std::memory_order_relaxed) &&
                          !interrupt_requested.load(std::memory_order_relaxed);
           ++b)
        run_block(&me, b);
      return finish(job_args);
    }
    uint32_t seq = sequence_.load(std::memory_order_relaxed) + 1;
    ticket_.store((uint64_t)seq << 32, std::memory_order_release);
    sequence_.store(seq, std::memory_order_release);
    sequence_.notify_all();
    me.job = &job;
    run_claimed_blocks(&me, seq);
    // Close the launch, then wait for the blocks other workers still run.
    uint64_t last = ticket_.exchange(((uint64_t)seq << 32) | 0xffffffffu, std::memory_order_acq_rel);
    uint64_t claimed = (uint32_t)last;
    if (claimed > total) claimed = total;
    std::chrono::steady_clock::time_point interrupted_at{};
    bool interrupted = false;
    while (job.done_blocks.load(std::memory_order_acquire) < claimed) {
      cpu_relax();
      if (__builtin_expect(interrupt_requested.load(std::memory_order_relaxed) != 0, 0)) {
        auto now = std::chrono::steady_clock::now();
        if (!interrupted) {
          interrupted = true;
          interrupted_at = now;
        } else if (now - interrupted_at > std::chrono::milliseconds(300)) {
          // Blocks that ignore the interrupt (no barrier in their loop): give
          // up on them, and refuse launches until they return.
          abandoned_blocks_ = claimed;
          snprintf(abandoned_kernel_, sizeof abandoned_kernel_, "%s", job.kernel);
          uint64_t running = claimed - job.done_blocks.load();
          job_args.error = std::string("kernel ") + job.kernel + ": interrupted by SIGINT (Ctrl-C), but " +
                           std::to_string(running) +
                           " of its blocks still run on other worker threads in a loop with no __syncthreads(), where "
                           "an interrupt cannot stop them; the launch was abandoned and the cpu executor refuses "
                           "launches until those blocks return";
          return 3;
        }
      }
    }
    return finish(job_args);
  }

 private:
  int finish(Job& out) {
#if defined(WD_RACE)
    __tsan_acquire(&launch_done_sync);  // what every thread of the launch did happens before what follows it
#endif
    if (interrupt_requested.load()) {
      out.error = std::string("kernel ") + job_.kernel + ": launch interrupted by SIGINT (Ctrl-C); it did not complete";
      if (job_.failed.load() && job_.error.find("SIGINT") != std::string::npos) out.error = job_.error;
      return 2;
    }
    if (job_.failed.load()) {
      out.error = job_.error;
      return 1;
    }
    return 0;
  }

  // Claim the next run of up to job_.chunk blocks of launch `seq`: [*first, *first + *count).
  bool grab(uint32_t seq, uint64_t* first, uint64_t* count) {
    uint64_t v = ticket_.load(std::memory_order_acquire);
    const uint64_t total = job_.total_blocks.load(std::memory_order_relaxed);
    for (;;) {
      if ((uint32_t)(v >> 32) != seq) return false;
      uint64_t b = (uint32_t)v;
      if (b >= total || job_.failed.load(std::memory_order_relaxed) ||
          interrupt_requested.load(std::memory_order_relaxed))
        return false;
      uint64_t n = std::min<uint64_t>(job_.chunk, total - b);
      if (ticket_.compare_exchange_weak(v, v + n, std::memory_order_acq_rel)) {
        *first = b;
        *count = n;
        return true;
      }
    }
  }

  // Run claimed runs of blocks until the launch has none left. A claimed run always counts as done
  // in full (the launcher waits for every claimed block); after a failure or an interrupt its
  // remaining blocks are skipped, as unclaimed ones are.
  void run_claimed_blocks(Worker* me, uint32_t seq) {
    uint64_t first, count;
    while (grab(seq, &first, &count)) {
      for (uint64_t b = first; b < first + count; ++b) {
        if (b > first && (job_.failed.load(std::memory_order_relaxed) ||
                          interrupt_requested.load(std::memory_order_relaxed)))
          break;
        run_block(me, b);
      }
      job_.done_blocks.fetch_add(count, std::memory_order_acq_rel);
    }
  }

  void worker_main(uint32_t seen) {
    // Ctrl-C goes to the thread that launched (Python's); workers see the flag.
    sigset_t interrupt;
    sigemptyset(&interrupt);
    sigaddset(&interrupt, SIGINT);
    pthread_sigmask(SIG_BLOCK, &interrupt, nullptr);
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
#if defined(WD_RACE)
      __tsan_acquire(&launch_start_sync);
#endif
      run_claimed_blocks(&me, seq);
    }
  }

  int n_threads_;
  std::vector<std::thread> threads_;
  std::atomic<uint32_t> sequence_{0};
  std::atomic<uint64_t> ticket_{0};
  std::atomic<bool> stopping_{false};
  std::mutex launch_mutex_;
  Job job_;
  uint64_t abandoned_blocks_ = 0;  // blocks an interrupted launch left running (0: none)
  char abandoned_kernel_[256] = "";

 public:
  bool unusable() const { return abandoned_blocks_ != 0 && job_.done_blocks.load() < abandoned_blocks_; }
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


// ------------------------------------------------------------------ signals
struct sigaction previous_sigint;
bool sigint_installed = false;
// The faults handled in kernel code, and what was installed for each before us.
constexpr int kFaultSignals[3] = {SIGSEGV, SIGBUS, SIGFPE};
struct sigaction previous_fault[3];
int fault_slot(int sig) { return sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : 2; }
uintptr_t libc_text_lo[8], libc_text_hi[8];
int libc_text_ranges = 0;

int find_libc_text(struct dl_phdr_info* info, size_t, void* data) {
  uintptr_t inside = (uintptr_t)data;
  bool found = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && inside >= lo && inside < lo + ph.p_memsz) found = true;
  }
  if (!found) return 0;
  for (int i = 0; i < info->dlpi_phnum && libc_text_ranges < 8; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      libc_text_lo[libc_text_ranges] = info->dlpi_addr + ph.p_vaddr;
      libc_text_hi[libc_text_ranges] = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
      ++libc_text_ranges;
    }
  }
  return 1;
}

#if defined(WD_CAN_ESCAPE)
// Kernel code inside a C library call may hold libc's locks (printf's stdout
// lock, malloc's arena lock): never abandoned there.
bool pc_in_libc(void* context) {
  uintptr_t pc = (uintptr_t)((ucontext_t*)context)->uc_mcontext.gregs[REG_RIP];
  for (int i = 0; i < libc_text_ranges; ++i)
    if (pc >= libc_text_lo[i] && pc < libc_text_hi[i]) return true;
  return false;
}

// Leave the kernel code a signal interrupted, for the scheduler (fiber) or the
// block's setjmp (plain call). The signal frame is abandoned; SA_NODEFER kept
// the signal unblocked; the interrupted code's floating-point modes come back.
[[noreturn]] void abandon_from_handler(Worker* w, int event, void* context) {
  ucontext_t* uc = (ucontext_t*)context;
  if (uc->uc_mcontext.fpregs) {
    unsigned int mxcsr = uc->uc_mcontext.fpregs->mxcsr;
    unsigned short cwd = uc->uc_mcontext.fpregs->cwd;
    asm volatile("ldmxcsr %0" ::"m"(mxcsr));
    asm volatile("fldcw %0" ::"m"(cwd));
  }
  w->event = event;
  w->event_thread = w->plain_mode ? linear_thread(w) : w->current;
  w->failed = true;
  w->in_kernel = 0;
  if (w->plain_mode) longjmp(w->plain_abort, 1);
  Fiber& f = w->fibers[w->current];
  f.state = Fiber::DONE;
  wd_fiber_switch(&f.sp, w->scheduler_sp);
  __builtin_unreachable();
}
#endif

void call_previous(const struct sigaction& previous, int sig, siginfo_t* info, void* context) {
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  }
}

extern "C" void wd_sigint_handler(int sig, siginfo_t* info, void* context) {
  int saved_errno = errno;
  interrupt_requested.store(1);
  call_previous(previous_sigint, sig, info, context);  // Python's: KeyboardInterrupt after the launch returns
  long tid = current_tid();
  Worker* w = find_worker(tid);
#if defined(WD_CAN_ESCAPE)
  if (w && w->in_kernel && !pc_in_libc(context)) {
    errno = saved_errno;
    abandon_from_handler(w, Worker::INTERRUPTED, context);
  }
#endif
  long launcher = launching_tid.load();
  if (launcher > 0 && launcher != tid) syscall(SYS_tgkill, (long)getpid(), launcher, SIGINT);  // it may be in a kernel
  errno = saved_errno;
}

#if defined(WD_CAN_ESCAPE)
extern "C" void wd_fault_handler(int sig, siginfo_t* info, void* context) {
  Worker* w = find_worker(current_tid());
  if (sig == SIGSEGV && info->si_code > 0 && w && w->on_fiber && !w->plain_mode && w->current < w->fibers.size()) {
    Fiber& f = w->fibers[w->current];
    char* addr = (char*)info->si_addr;
    if (addr >= f.stack_low - page_size() && addr < f.stack_low) abandon_from_handler(w, Worker::STACK_OVERFLOW, context);
  }
  // A fault raised by kernel code itself (si_code > 0: not sent by kill), not
  // inside a C library call it made (which may hold libc's locks).
  if (info->si_code > 0 && w && w->in_kernel && !pc_in_libc(context)) {
    w->fault_signal = sig;
    w->fault_code = info->si_code;
    w->fault_address = info->si_addr;
    w->fault_pc = (void*)((ucontext_t*)context)->uc_mcontext.gregs[REG_RIP];
    abandon_from_handler(w, Worker::FAULT, context);
  }
  // Not ours: what was there before (Python's faulthandler, or the default
  // action). A handler that chains back to us (one installed after us, then
  // ours again in front of it) ends in the default action, not a loop.
  static volatile sig_atomic_t chaining = 0;
  const struct sigaction& previous = previous_fault[fault_slot(sig)];
  if (!chaining && (previous.sa_flags & SA_SIGINFO ? previous.sa_sigaction != nullptr
                                                  : (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN))) {
    chaining = 1;
    call_previous(previous, sig, info, context);
    chaining = 0;
    return;
  }
  signal(sig, SIG_DFL);  // returning re-runs the faulting instruction: the default action
}
#endif

}  // namespace

// ------------------------------------------------------------------ C API
// Called by kernel code (through the emulation header).
WD_EXPORT int wd_cpu_barrier(const char* file, int line, int predicate) {
  Worker* w = tl_worker;
  if (w->plain_mode) {
    w->in_kernel = 0;
    char me[64];
    thread_name(me, sizeof me, w, linear_thread(w));
    w->failed = true;
    report(w,
           "divergent barrier: thread %s reached __syncthreads() at %s:%d after thread (0,0,0) had exited without "
           "reaching any barrier (every thread of a block must reach the same barriers)",
           me, file, line);
    longjmp(w->plain_abort, 1);
  }
  leave_kernel(w);
  if (interrupt_requested.load(std::memory_order_relaxed)) abandon_fiber(w, Worker::INTERRUPTED);
  Fiber& f = w->fibers[w->current];
  f.state = Fiber::AT_BARRIER;
  f.site_file = file;
  f.site_line = line;
  f.predicate = predicate;
#if defined(WD_RACE)
  // Everything before the barrier, in every thread, happens before everything after it.
  void* sync = w->block_sync + (f.phase++ & 1);
  __tsan_release(sync);
  yield_to_scheduler(w, f);
  __tsan_acquire(sync);
#else
  yield_to_scheduler(w, f);
#endif
  if (!enter_kernel(w)) abandon_fiber(w, Worker::INTERRUPTED);
  return f.barrier_result;
}

// Called by kernel code after each device printf: a Ctrl-C that came while the
// kernel was inside the C library (where the handler leaves it) ends it here.
WD_EXPORT void wd_cpu_poll_interrupt() {
  if (!interrupt_requested.load(std::memory_order_relaxed)) return;
  Worker* w = tl_worker;
  if (!w || !w->job) return;
  w->in_kernel = 0;
  if (w->plain_mode) {
    w->event = Worker::INTERRUPTED;
    w->event_thread = linear_thread(w);
    w->failed = true;
    longjmp(w->plain_abort, 1);
  }
  abandon_fiber(w, Worker::INTERRUPTED);
}

WD_EXPORT void wd_cpu_device_fail(const char* what, const char* file, int line) {
  Worker* w = tl_worker;
  w->in_kernel = 0;
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
  if (poisoned.load()) {
    snprintf(error, error_size, "kernel %s: the cpu executor is unusable: %s, which may have written outside its "
             "arrays; restart the process", kernel, poisoned_by);
    return 1;
  }
  if (total == 0 || threads == 0 || total >= 0xffffffffull || threads >= 0xffffffffull) {
    snprintf(error, error_size, "kernel %s: invalid launch geometry", kernel);
    return 1;
  }
  job.total_blocks.store(total);
  job.launch_index = stat_launches.fetch_add(1, std::memory_order_relaxed);
  Pool& p = get_pool();
  interrupt_requested.store(0, std::memory_order_relaxed);
  launching_tid.store(this_thread_worker().tid, std::memory_order_relaxed);
  int rc = p.launch(job);
  launching_tid.store(0, std::memory_order_relaxed);
  last_status.store(rc, std::memory_order_relaxed);
  fflush(stdout);  // device printf output appears when the launch returns
  if (rc != 0) snprintf(error, error_size, "%s", job.error.c_str());
  return rc;  // 0, 1 (error), 2 (interrupted) or 3 (interrupted; blocks left running)
}


// (Re)install the SIGINT and SIGSEGV handlers in front of whatever is there
// (Python's SIGINT handler, faulthandler's SIGSEGV one), unless they already
// are. Called when a cpu backend is made and at every build; a handler
// installed later (signal.signal, faulthandler.enable) replaces them until then.
// Returns a bit mask: 1 SIGINT handled, 2 stack overflows handled.
WD_EXPORT int wd_cpu_install_signal_handlers() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (libc_text_ranges == 0) {
    Dl_info info;
    if (dladdr((void*)&fprintf, &info) && info.dli_fbase) dl_iterate_phdr(find_libc_text, info.dli_fbase);
  }
  this_thread_worker();  // the launching thread: registered, with an alternate signal stack
  int out = 0;
  struct sigaction now;
  if (sigaction(SIGINT, nullptr, &now) == 0) {
    bool ours = (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == wd_sigint_handler;
    bool handled = (now.sa_flags & SA_SIGINFO) ? now.sa_sigaction != nullptr
                                               : (now.sa_handler != SIG_DFL && now.sa_handler != SIG_IGN);
    if (!ours && handled) {  // SIG_DFL / SIG_IGN: Ctrl-C already ends (or never reaches) the process
      struct sigaction mine{};
      mine.sa_sigaction = wd_sigint_handler;
      mine.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
      sigemptyset(&mine.sa_mask);
      if (sigaction(SIGINT, &mine, &previous_sigint) == 0) sigint_installed = true;
    }
    if (ours || (handled && sigint_installed)) out |= 1;
  }
#if defined(WD_CAN_ESCAPE)
  for (int i = 0; i < 3; ++i) {
    const int sig = kFaultSignals[i];
    if (sigaction(sig, nullptr, &now) != 0) continue;
    if (!((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == wd_fault_handler)) {
      struct sigaction mine{};
      mine.sa_sigaction = wd_fault_handler;
      mine.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
      sigemptyset(&mine.sa_mask);
      if (sigaction(sig, &mine, &previous_fault[i]) != 0) continue;
    }
    if (sig == SIGSEGV) out |= 2;
  }
#endif
  return out;
}

// What the last launch returned (for Python, when a KeyboardInterrupt came first).
WD_EXPORT int wd_cpu_last_status() { return last_status.load(); }

WD_EXPORT int wd_cpu_num_workers() { return get_pool().size(); }

WD_EXPORT void wd_cpu_set_num_workers(int n) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (pool && pool->unusable()) return;  // its threads cannot be joined while they run abandoned blocks
  delete pool;
  pool = new Pool(n > 0 ? n : default_workers());
}

// The shuffle (see the top of this file): on with `seed`, or off.
WD_EXPORT void wd_cpu_set_shuffle(int on, unsigned long long seed) {
  shuffle_seed.store(seed);
  shuffle_on.store(on != 0);
}

// 1 in a runtime built for race mode (-DWD_RACE).
WD_EXPORT int wd_cpu_race_mode() { return kRace ? 1 : 0; }

// {launches, blocks run with fibers, blocks run on the plain fast path}
WD_EXPORT void wd_cpu_stats(unsigned long long* out) {
  out[0] = stat_launches.load();
  out[1] = stat_fiber_blocks.load();
  out[2] = stat_plain_blocks.load();
}
