// A CUDA injection library that records every kernel's start and end on the GPU through
// CUPTI's activity API, graph kernel nodes included, for a process that knows nothing of it:
//   CUDA_INJECTION64_PATH=libkernel_trace.so KERNEL_TRACE_OUT=FILE PROGRAM ...
// It shows what our own timeline (src/kernels/cuda/runtime/timeline.h) cannot: the library
// kernels (cuBLASLt's, CUTLASS's) as they run between ours in a replayed decode graph.
// FILE gets one line a kernel, tab-separated, in no particular order:
//   start_ns end_ns correlation_id graph_id graph_node_id grid(x,y,z) block(x,y,z) name
// (a graph's kernels carry the correlation id of the launch that replayed them).
// tools/kernel_trace_summary.py reads it.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlignment = 8;

std::FILE* out = nullptr;
std::mutex out_mutex;

void check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return;
  const char* message = nullptr;
  cuptiGetResultString(result, &message);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, message ? message : "?");
  std::exit(1);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(out_mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    std::fprintf(out, "%llu\t%llu\t%u\t%u\t%llu\t%d,%d,%d\t%d,%d,%d\t%s\n",
                 static_cast<unsigned long long>(k->start), static_cast<unsigned long long>(k->end),
                 k->correlationId, k->graphId, static_cast<unsigned long long>(k->graphNodeId),
                 k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ,
                 k->name ? k->name : "?");
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    std::fprintf(stderr, "kernel_trace: %zu records dropped\n", dropped);
  }
  std::free(buffer);
}

void flush_at_exit() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(out_mutex);
  std::fclose(out);
}

}  // namespace

// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH).
extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("KERNEL_TRACE_OUT");
  if (path == nullptr) path = "kernel_trace.tsv";
  out = std::fopen(path, "w");
  if (out == nullptr) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return 0;
  }
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
        "cuptiActivityRegisterCallbacks");
  // The concurrent kind does not serialize kernels, so programmatic dependent launch still
  // overlaps them as it does untraced.
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
  std::atexit(flush_at_exit);
  return 1;
}
