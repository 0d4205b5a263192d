#include "corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace lm {

namespace fs = std::filesystem;

namespace {

void append_file(const fs::path &file, std::vector<uint8_t> &bytes) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file.string());
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Batch batch_at(const std::vector<uint8_t> &text, int batch, int seq, const std::vector<size_t> &offsets) {
    Batch out;
    for (int b = 0; b < batch; b++) {
        const uint8_t *window = text.data() + offsets[b];
        out.inputs.insert(out.inputs.end(), window, window + seq);
        out.targets.insert(out.targets.end(), window + 1, window + seq + 1);
    }
    return out;
}

}  // namespace

Corpus Corpus::load(const std::string &path, double validation_fraction) {
    std::vector<uint8_t> bytes;
    if (fs::is_directory(path)) {
        std::vector<fs::path> files;
        for (const auto &entry : fs::directory_iterator(path)) {
            if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path());
        }
        std::sort(files.begin(), files.end());
        for (const fs::path &file : files) append_file(file, bytes);
    } else {
        append_file(path, bytes);
    }
    const size_t split = size_t(double(bytes.size()) * (1.0 - validation_fraction));
    Corpus corpus;
    corpus.train.assign(bytes.begin(), bytes.begin() + split);
    corpus.validation.assign(bytes.begin() + split, bytes.end());
    return corpus;
}

Batch random_batch(const std::vector<uint8_t> &text, int batch, int seq, std::mt19937_64 &rng) {
    if (text.size() < size_t(seq) + 1) throw std::runtime_error("text shorter than one sequence");
    std::uniform_int_distribution<size_t> offset(0, text.size() - seq - 1);
    std::vector<size_t> offsets(batch);
    for (size_t &o : offsets) o = offset(rng);
    return batch_at(text, batch, seq, offsets);
}

Packer::Packer(const std::vector<uint8_t> &text) : text(text) {
    size_t start = 0;
    for (size_t k = 0; k < text.size(); k++) {
        if (k + 1 < text.size() && !(text[k] == '\n' && text[k + 1] == '\n')) continue;
        if (k + 1 - start >= 2) paragraphs.emplace_back(start, k + 1);
        start = k + 2;
    }
    if (paragraphs.empty()) throw std::runtime_error("no paragraph of two bytes or more to pack");
}

PackedBatch Packer::batch(int batch, int seq, std::mt19937_64 &rng) const {
    std::uniform_int_distribution<size_t> pick(0, paragraphs.size() - 1);
    PackedBatch out;
    out.cu_seqlens = {0};
    const int64_t total = int64_t(batch) * seq;
    while (out.cu_seqlens.back() < total) {
        const auto [start, end] = paragraphs[pick(rng)];
        const int64_t tokens = std::min<int64_t>({int64_t(end - start) - 1, seq, total - out.cu_seqlens.back()});
        out.inputs.insert(out.inputs.end(), text.begin() + start, text.begin() + start + tokens);
        out.targets.insert(out.targets.end(), text.begin() + start + 1, text.begin() + start + tokens + 1);
        out.cu_seqlens.push_back(out.cu_seqlens.back() + tokens);
    }
    return out;
}

Batch evaluation_batch(const std::vector<uint8_t> &text, int batch, int seq, int k, int count) {
    const size_t windows = (text.size() - 1) / seq;
    if (windows < size_t(batch)) throw std::runtime_error("text shorter than one evaluation batch");
    const size_t spacing = std::max<size_t>(1, windows / (size_t(batch) * count));
    std::vector<size_t> offsets(batch);
    for (int b = 0; b < batch; b++) offsets[b] = ((size_t(k) * batch + b) * spacing % windows) * seq;
    return batch_at(text, batch, seq, offsets);
}

}  // namespace lm
