#include "schedule_helpers.h"

#include <algorithm>
#include <optional>

namespace gka {

using namespace Halide;

void transposed_block_copy(Func f, const std::vector<Func> &consumers, const LoopLevel &at, int block, int vec) {
    Func copy = f.in(consumers);
    std::vector<Var> a = copy.args();  // (d, h, t, b)
    // Square tiles, vectorized over tokens and unrolled over d, become dense
    // loads and in-register transposes instead of gathers.
    Var ti("ti"), di("di");
    copy.compute_at(at)
        .reorder_storage(a[2], a[0], a[1], a[3])
        .split(a[2], a[2], ti, vec, TailStrategy::RoundUp)
        .split(a[0], a[0], di, vec, TailStrategy::GuardWithIf)  // any head dim: never read past D
        .reorder(ti, di, a[2], a[0], a[1], a[3])
        .vectorize(ti)
        .unroll(di)
        // A constant size: without it bounds inference sizes each block's copy at
        // run time, and it is malloc'ed and freed once per block.
        .bound_storage(a[2], (block + vec - 1) / vec * vec);
}

namespace {

// A token's d contiguous, then the tokens of a head: (d, t, h, b), vectorized over d.
Func &head_major_layout(Func &f, int vec) {
    const std::vector<Var> a = f.args();  // (d, h, t, b)
    return f.reorder_storage(a[0], a[2], a[1], a[3])
        .reorder(a[0], a[2], a[1], a[3])
        .vectorize(a[0], vec, TailStrategy::GuardWithIf);
}

}  // namespace

Func head_major(Func f, int vec) {
    Func copy = f.in();
    const std::vector<Var> a = copy.args();  // (d, h, t, b)
    Var hb("hb");
    head_major_layout(copy.compute_root(), vec).fuse(a[1], a[3], hb).parallel(hb);
    return copy;
}

void head_major_block(Func f, const LoopLevel &at, int tokens, int vec) {
    head_major_layout(f.compute_at(at).bound_storage(f.args()[2], tokens), vec);
}

void schedule_centre(Centre c, const Vars &v, int vec) {
    // A few tokens a head, serial: waking the thread pool for them cost more.
    // The mean at root: inlined, its division ran once per use in the copies.
    c.mean.compute_root().vectorize(v.d, vec, TailStrategy::GuardWithIf);
    c.sum.compute_at(c.mean, v.h).vectorize(v.d, vec, TailStrategy::GuardWithIf);
    c.sum.update().vectorize(v.d, vec, TailStrategy::GuardWithIf);
}

void schedule_token_dot(Func f, const Vars &v, const Expr &head_dim, int vec) {
    // Heads in parallel. A token's D features are contiguous, so with a head dim
    // fixed at compile time each dot is one vector reduction over d; otherwise
    // tokens go in the lanes and each d is a strided gather. (Tokens in lanes and
    // parallel over batches only, as first written, took 18% of the (255, 0)
    // forward at B=1 for |x|^2, and 3% of the (255, 0) backward for Dl: one
    // thread, all gathers.)
    const int D = constant_head_dim(head_dim);
    const RVar d = f.rvars()[0];
    f.compute_root().vectorize(v.t, vec, TailStrategy::RoundUp);  // zeroing T x H floats: serial
    Stage update = f.update();
    if (D > 0 && D % vec == 0) {
        update.reorder(d, v.t, v.h, v.b).atomic().vectorize(d);
    } else {
        update.reorder(v.t, d, v.h, v.b).vectorize(v.t, vec, TailStrategy::RoundUp);
    }
    update.parallel(v.h).parallel(v.b);
}

void schedule_band_sum(BandSum &s, const Vars &v, const Expr &head_dim, int vec, int score_tile, int tile,
                       int d_block, const LoopLevel &at) {
    Var os = s.score_block, oo("oo"), oi("oi"), dd("dd"), lanes("lanes");
    s.sum.compute_at(at).vectorize(v.d, vec, TailStrategy::GuardWithIf);
    s.stats.compute_at(at).vectorize(v.offset, vec);
    // One band of one head: said, so that a head dim fixed at compile time gives
    // both a constant size, on the stack. (Bounds inference sizes them at run
    // time, and each band's sums were malloc'ed and freed.)
    for (Func f : {s.sum, s.stats}) f.bound_storage(v.band, 1).bound_storage(v.h, 1).bound_storage(v.b, 1);

    // A head dim fixed at compile time: each micro-tile's accumulators are the
    // sums themselves, which LLVM keeps in registers across the block. Known at
    // run time alone, the sums' rows are a run-time stride apart, and LLVM
    // keeps accumulators that might alias one another in memory: there each
    // block's products go to a micro-tile of their own (rfactor) of a constant
    // size, in registers, added to the sums once a block.
    Stage sum = s.sum.update();
    const bool fixed_head_dim = constant_head_dim(head_dim) > 0;
    Var block_var("block_var");
    Func micro_tile = fixed_head_dim ? Func() : sum.rfactor(s.block, block_var);
    sum.split(v.offset, os, oo, score_tile).split(oo, oo, oi, tile).unroll(oi);
    std::vector<VarOrRVar> order = {v.d, oi, dd, oo, os, s.block, v.band, v.h, v.b};
    if (fixed_head_dim) {  // the products' own loops: the keys of the block, a pair's keys innermost
        order.insert(order.begin() + 2, s.in_block);
        if (s.pair) order.insert(order.begin(), *s.pair);
    }
    split_head_dim(sum, v.d, dd, head_dim, vec, d_block, order, true);
    Stage products = sum;
    if (!fixed_head_dim) {
        const std::vector<Var> a = micro_tile.args();  // (d, offset, band, h, b, block_var)
        std::vector<VarOrRVar> products_order = {a[0], a[1], a[5], s.in_block};
        if (s.pair) products_order.insert(products_order.begin(), *s.pair);
        micro_tile.bound_extent(a[5], 1);
        products = schedule_micro_tile(micro_tile, LoopLevel(s.sum, dd), products_order, d_block, tile, vec);
        products.unroll(a[5]);
    }
    // A pair's two products in adjacent lanes, reduced into one lane of d: the
    // bfloat16 dot product (vdpbf16ps) of a vector of d.
    if (s.pair) products.atomic().vectorize(*s.pair);
    // The pair tiles store a block's queries innermost: a query's stats are one
    // lane of a vector add per key.
    Stage stats = s.stats.update();
    std::vector<VarOrRVar> stats_order = {lanes, s.in_block, os, s.block, v.band, v.h, v.b};
    if (s.pair) stats_order.insert(stats_order.begin() + 1, *s.pair);
    stats.split(v.offset, os, lanes, score_tile).reorder(stats_order).vectorize(lanes, vec).unroll(lanes);
    stats.compute_with(sum, os);
}

Stage schedule_micro_tile(Func tile, const LoopLevel &at, const std::vector<VarOrRVar> &order, int d_block, int across,
                          int vec) {
    const std::vector<Var> a = tile.args();
    tile.compute_at(at)
        .vectorize(a[0], vec)
        .unroll(a[0])
        .unroll(a[1])
        .bound_extent(a[0], d_block)
        .bound_extent(a[1], across);
    for (size_t k = 2; k < a.size(); k++) tile.bound_storage(a[k], 1);
    Stage update = tile.update();
    update.reorder(order).vectorize(a[0], vec).unroll(a[0]).unroll(a[1]);
    return update;
}

int split_head_dim(Stage s, const Var &d, const Var &blocks, const Expr &head_dim, int vec, int d_block,
                   const std::vector<VarOrRVar> &order, bool padded) {
    const int D = constant_head_dim(head_dim), db = std::min(D, d_block);
    if (D > 0 && D % db == 0 && db % vec == 0) {
        s.split(d, blocks, d, db).reorder(order).vectorize(d, vec).unroll(d);
        return db;
    }
    if (padded && d_block % vec == 0) {
        s.split(d, blocks, d, d_block, TailStrategy::RoundUp).reorder(order).vectorize(d, vec).unroll(d);
    } else {
        s.split(d, blocks, d, d_block, TailStrategy::GuardWithIf)
            .reorder(order)
            .vectorize(d, vec, TailStrategy::GuardWithIf);
    }
    return d_block;
}


int constant_head_dim(const Expr &head_dim) {
    const std::optional<int64_t> d = Internal::as_const_int(head_dim);
    return d ? int(*d) : 0;
}

void schedule_pair_tile(Func f, const Var &lanes, const Var &across, const LoopLevel &at, int lane_extent,
                        int across_extent, int vec) {
    const std::vector<Var> a = f.args();  // (j, i, h, b)
    f.compute_at(at)
        .bound_extent(lanes, lane_extent)
        .bound_extent(across, across_extent)
        .reorder_storage(lanes, across)
        .reorder(lanes, across)
        .vectorize(lanes, vec)
        // One head of one batch a tile: said, so that the tile has a constant size
        // (bounds inference across the compute_with'd sums cannot prove it).
        .bound_storage(a[2], 1)
        .bound_storage(a[3], 1);
}

void schedule_score_tile(Func f, const RDom &rd, const Var &lanes, const Var &across, const LoopLevel &at,
                         int lane_extent, int across_extent, int vec, int across_chunk, bool feature_pairs) {
    schedule_pair_tile(f, lanes, across, at, lane_extent, across_extent, vec);
    // At most 4 vectors of lanes and across_chunk columns at a time, so that the
    // accumulators stay in registers when a tile is larger than that.
    const int chunk = 4 * vec;
    Stage update = f.update();
    VarOrRVar lane_loop = lanes, across_loop = across;
    std::vector<VarOrRVar> order;
    if (lane_extent > chunk && lane_extent % chunk == 0) {
        Var outer("lanes_outer"), inner("lanes_inner");
        update.split(lanes, outer, inner, chunk);
        lane_loop = inner;
        order.push_back(outer);
    }
    if (across_chunk < across_extent) {
        Var outer("across_outer"), inner("across_inner");
        update.split(across, outer, inner, across_chunk);
        across_loop = inner;
        order.insert(order.begin(), outer);
    }
    if (feature_pairs) {  // a pair innermost, then the tile, then the pairs of d
        order.insert(order.begin(), {rd.x, lane_loop, across_loop, rd.y});
    } else {
        order.insert(order.begin(), {lane_loop, across_loop, rd.x});
    }
    update.reorder(order).vectorize(lane_loop, vec).unroll(lane_loop).unroll(across_loop);
    if (feature_pairs) update.atomic().vectorize(rd.x);
}

void transposed_pairs(Func f, const LoopLevel &at, int tokens, int vec) {
    const std::vector<Var> a = f.args();  // (pair, dp, h, t, b)
    // Square tiles of tokens and pairs, as transposed_block_copy's.
    Var ti("ti"), di("di");
    f.compute_at(at)
        .reorder_storage(a[0], a[3], a[1], a[2], a[4])
        .split(a[3], a[3], ti, vec, TailStrategy::RoundUp)
        .split(a[1], a[1], di, vec, TailStrategy::GuardWithIf)
        .reorder(a[0], ti, di, a[3], a[1], a[2], a[4])
        .vectorize(a[0])
        .vectorize(ti)
        .unroll(di)
        .bound_storage(a[3], (tokens + vec - 1) / vec * vec);
}

void pairs_as_they_lie(Func f, const LoopLevel &at, int tokens, int vec) {
    const std::vector<Var> a = f.args();  // (pair, dp, h, t, b)
    f.compute_at(at)
        .reorder_storage(a[0], a[1], a[3], a[2], a[4])
        .reorder(a[0], a[1], a[3], a[2], a[4])
        .vectorize(a[0])
        .vectorize(a[1], vec, TailStrategy::GuardWithIf);
    if (tokens > 0) {
        f.bound_storage(a[3], tokens);
    } else {
        Var hb("hb");
        f.fuse(a[2], a[4], hb).parallel(hb);
    }
}

void head_major_token_pairs(Func f, int vec) {
    const std::vector<Var> a = f.args();  // (pair, d, [term,] h, p, b)
    const size_t n = a.size();
    std::vector<Var> order(a.begin(), a.end() - 3);
    order.insert(order.end(), {a[n - 2], a[n - 3], a[n - 1]});
    Var hb("hb");
    f.compute_root()
        .reorder_storage(order)
        .reorder(std::vector<VarOrRVar>(order.begin(), order.end()))
        .vectorize(a[0])
        .vectorize(a[1], vec, TailStrategy::GuardWithIf)
        .fuse(a[n - 3], a[n - 1], hb)
        .parallel(hb);
    for (size_t k = 2; k + 3 < n; k++) f.unroll(a[k]);  // the terms
}

void schedule_bf16_pairs(BF16Pairs t, const LoopLevel &at, int vec) {
    const std::vector<Var> a = t.f.args();  // (pair, ..., h, b)
    std::vector<Var> order = {a[0], t.lanes, t.across};
    if (t.term) order.insert(order.begin() + 2, *t.term);
    t.f.compute_at(at)
        .bound_extent(t.lanes, t.lane_extent)
        .bound_extent(t.across, t.across_extent)
        .reorder(std::vector<VarOrRVar>(order.begin(), order.end()))
        .vectorize(a[0])
        .vectorize(t.lanes, std::min(vec, t.lane_extent))
        .bound_storage(a[a.size() - 2], 1)
        .bound_storage(a.back(), 1);
    if (t.term) t.f.bound_extent(*t.term, 2).unroll(*t.term);
    t.f.reorder_storage(order);
}

void schedule_token_output(Func out, const Vars &v, int vec) {
    Var to("to"), ti("ti");
    out.split(v.t, to, ti, 16, TailStrategy::GuardWithIf)
        .reorder(v.d, ti, v.h, to, v.b)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(to);
}

}  // namespace gka
