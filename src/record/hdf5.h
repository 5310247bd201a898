// HDF5 helpers of the attention record files (internal to record/: the writer, the reader and the stage):
// attributes as JSON values, datasets of rows stored one chunk per sample, chunks encoded in parallel.
#pragma once
#include <ATen/core/Tensor.h>
#include <H5Cpp.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mimic::record {

inline constexpr const char* kFormat = "mimic-record-1";
// The per-layer datasets every record holds (beside the optional "weights").
inline constexpr const char* kTensors[] = {"q", "k", "v", "o"};

// The innermost message of HDF5's error stack (the most specific one), then the stack is cleared.
std::string h5_error_text(const H5::Exception& e);
// The words h5_error_text makes of HDF5's innermost and outermost messages: one line, and where the innermost quotes
// the system's error ("... errno = 28, error message = 'No space left on device', buf = 0x..., offset = 0") that error
// alone, named — a full disk as such.
std::string h5_error_words(const std::string& inner, const std::string& outer);

// IEEE binary16 as an HDF5 type (h5py reads it as float16).
H5::FloatType half_type();

// Attributes as JSON values: strings (variable-length UTF-8), integers (int64), floats (float64), arrays
// of integers (int64 [n]); read_attr gives null for an absent attribute.
void write_attr(H5::H5Object& obj, const std::string& name, const nlohmann::json& v);
nlohmann::json read_attr(const H5::H5Object& obj, const std::string& name);
// An attribute value for messages ("absent" for null).
std::string show(const nlohmann::json& v);

// "layer_03": the group of a layer.
std::string layer_group(int64_t layer);

std::vector<hsize_t> dims_of(const H5::DataSet& ds);
// Grows or cuts a dataset to `rows` rows.
void set_rows(H5::DataSet& ds, hsize_t rows);
// An empty, extendible dataset of rows of `row_shape`, one chunk per row (shuffle + deflate when compression > 0).
H5::DataSet create_rows(H5::Group& parent, const std::string& name, const H5::DataType& type, std::vector<hsize_t> row_shape,
                        int compression);
// Rows [begin, begin+rows) of a dataset as a tensor of `st`, read through `memtype`.
at::Tensor read_rows(const H5::DataSet& ds, hsize_t begin, hsize_t rows, at::ScalarType st, const H5::DataType& memtype);
// The first row (index along dim 0) of `t` holding a value that is not finite (NaN or infinite), or -1: what a record
// may not store (the writer refuses such a batch, a reader such a read).
int64_t first_nonfinite_row(const at::Tensor& t);

// Writing a batch: every sample is one chunk, encoded here exactly as HDF5's filter pipeline would
// (shuffle, then zlib deflate; deflate is skipped for a chunk it would not shrink, which the filter mask
// records, as HDF5 does for its optional filters) — in parallel on LibTorch's threads — and stored with
// H5Dwrite_chunk. Readers decode through the ordinary pipeline.
struct Piece {
  H5::DataSet* ds;
  hsize_t begin;      // first row
  at::Tensor data;    // [rows, ...] contiguous, in the storage type
};
void write_pieces(std::vector<Piece>& pieces, int level);

}  // namespace mimic::record
