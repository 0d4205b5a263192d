// CUDA schedule of GKA decode (generators/gka_decode.h).
//
// Decode on a GPU is a read of the cache; this schedule is the plain form of
// it, in four small kernels, all without atomics (deterministic):
// - the cached keys' weights exp(s), one thread a key, the queries of a key in
//   the thread, stored (4 bytes a key and query against the key's 4*D);
// - each chunk's sums, one block a (chunk, head, batch), one thread a lane of
//   d (coalesced rows), walking the chunk's keys in order;
// - the chunks' row sums likewise, one thread a query;
// - the new tokens' pairs, the merge of the chunks in order, y and lse, small
//   kernels by (head, batch).
// The cache is read twice (weights, then sums). Fusing the two through shared
// memory would halve that; it waits for a GPU to measure it on.
#include "cuda_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

// chunk: cached keys a block of the sums (the algorithm's chunk: the order of
// the sums). key_threads: keys a block of the weights' kernel. output_tokens:
// tokens a block of the kernel that writes y.
const std::vector<Knob<CudaDecodeKnobs>> &CudaDecodeKnobs::fields() {
    using K = CudaDecodeKnobs;
    static const std::vector<Knob<K>> fields = {
        {"chunk", &K::chunk, {256, 512, 1024}}, {"key_threads", &K::key_threads, {}},
        {"output_tokens", &K::output_tokens, {}}};
    return fields;
}

CudaDecodeKnobs cuda_decode_knobs() {
    CudaDecodeKnobs k{};
    k.chunk = 512, k.key_threads = 128, k.output_tokens = 8;
    return k;
}

void schedule_decode_cuda(DecodePipeline &p, const CudaDecodeKnobs &k) {
    const Vars &v = p.v;
    Var jo("jo"), ji("ji");
    for (Func f : {p.key_count, p.first_slot}) f.compute_root().gpu_blocks(v.b);

    // Weights: a thread a cached key, its pair dot products (over d) in the thread.
    p.cached_weight.compute_root()
        .reorder(v.i, v.j, v.h, v.b)
        .gpu_tile(v.j, jo, ji, k.key_threads, TailStrategy::GuardWithIf)
        .gpu_blocks(jo, v.h, v.b);
    p.cached_scores.dot.compute_at(p.cached_weight, v.i);

    // A chunk's sums: a block a (chunk, head, batch), a thread a lane of d.
    const RVar key = p.cached_keys.x;
    p.chunk_sum.compute_root().reorder(v.i, v.d, v.chunk, v.h, v.b).gpu_blocks(v.chunk, v.h, v.b).gpu_threads(v.d);
    p.chunk_sum.update().reorder(key, v.i, v.d, v.chunk, v.h, v.b).gpu_blocks(v.chunk, v.h, v.b).gpu_threads(v.d);
    p.chunk_row_sum.compute_root().gpu_blocks(v.chunk, v.h, v.b).gpu_threads(v.i);
    p.chunk_row_sum.update().reorder(key, v.i, v.chunk, v.h, v.b).gpu_blocks(v.chunk, v.h, v.b).gpu_threads(v.i);

    // The new tokens' pairs, few, and the merge of the chunks, in order: a
    // block a (head, batch), a thread a lane of d (a query for the row sums).
    p.fresh_weight.compute_root().reorder(v.j, v.i, v.h, v.b).gpu_blocks(v.h, v.b).gpu_threads(v.i);
    p.fresh_scores.dot.compute_at(p.fresh_weight, v.j);
    for (auto [f, keys] : {std::pair{p.fresh_sum, p.fresh_keys}, std::pair{p.weighted_sum, p.chunks}}) {
        f.compute_root().reorder(v.i, v.d, v.h, v.b).gpu_blocks(v.h, v.b).gpu_threads(v.d);
        f.update().reorder(keys.x, v.i, v.d, v.h, v.b).gpu_blocks(v.h, v.b).gpu_threads(v.d);
    }
    for (Func f : {p.fresh_row_sum, p.row_sum}) {
        f.compute_root().gpu_blocks(v.h, v.b).gpu_threads(v.i);
        f.update().gpu_blocks(v.h, v.b).gpu_threads(v.i);
    }
    cuda::schedule_token_output(p.y, v, k.output_tokens);
    p.lse.gpu_tile(v.t, jo, ji, 32, TailStrategy::GuardWithIf).gpu_blocks(jo, v.h, v.b);
}

}  // namespace gka
