// A tensor-parallel group of ranks that are threads of this process over host memory (the CPU
// backend's): a collective waits until every rank has called it, then each rank reads the
// others' tensors directly. Sums run over the ranks in rank order, so every rank gets the same
// bits, run after run.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace nanovllm {

// One communicator per rank, rank i at index i. A collective that waits longer than `timeout`
// for the other ranks throws Error and aborts the group.
std::vector<std::shared_ptr<Communicator>> make_in_process_group(
    int size, std::chrono::milliseconds timeout = std::chrono::minutes(5));

}  // namespace nanovllm
