// The checked CPU (--device cpu-checked, mimic/core/checked_device.h): the CPU's kernels behind a stand-in device.
// What it must do to be worth running: compute the CPU's values digit for digit (forward and gradients, in place,
// through views, into resized outputs), and stop an operation that mixes a CPU tensor into the device's — naming
// the operator — while passing what a GPU passes too (0-dimensional CPU scalars, CPU index lists, copies).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "mimic/core/error.h"
#include "mimic/core/precision.h"
#include "mimic/core/runtime.h"
#include "test_util.h"

// Under AddressSanitizer (tools/sanitize.sh; MIMIC_TEST_UNDER_ASAN, test_util.h) the death test's child reports its
// SEGV: that report must go to the child's stderr, which the death test swallows, not to the report folder, where any
// file fails the sanitizer job.
#ifdef MIMIC_TEST_UNDER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

c10::Device checked() { return mimic::checked_device(); }

TEST(CheckedDevice, ComputesTheCpusValuesForwardAndGradientsBitForBit) {
  torch::manual_seed(1);
  torch::nn::Sequential cpu(torch::nn::Linear(6, 8), torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})), torch::nn::GELU(),
                            torch::nn::Linear(8, 5));
  torch::nn::Sequential dev(torch::nn::Linear(6, 8), torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})), torch::nn::GELU(),
                            torch::nn::Linear(8, 5));
  {
    torch::NoGradGuard ng;
    for (size_t i = 0; i < cpu->parameters().size(); ++i) dev->parameters()[i].copy_(cpu->parameters()[i]);
  }
  dev->to(checked());
  for (const auto& p : dev->parameters()) EXPECT_EQ(p.device(), checked()) << "Module::to moved every parameter";
  auto x = torch::randn({4, 3, 6});
  auto target = torch::randint(0, 5, {12});
  auto loss_cpu = torch::nn::functional::cross_entropy(cpu->forward(x).reshape({12, 5}).log_softmax(-1), target);
  auto out_dev = dev->forward(x.to(checked()));
  EXPECT_EQ(out_dev.device(), checked());
  auto loss_dev = torch::nn::functional::cross_entropy(out_dev.reshape({12, 5}).log_softmax(-1), target.to(checked()));
  loss_cpu.backward();
  loss_dev.backward();
  EXPECT_EQ(loss_dev.item<float>(), loss_cpu.item<float>());
  for (size_t i = 0; i < cpu->parameters().size(); ++i) {
    const auto g = dev->parameters()[i].grad();
    ASSERT_TRUE(g.defined()) << "parameter " << i << " has no gradient on the checked CPU";
    EXPECT_EQ(g.device(), checked());
    EXPECT_TRUE(torch::equal(g.to(torch::kCPU), cpu->parameters()[i].grad())) << "gradient of parameter " << i;
  }
  // a factory with the device draws from the CPU generator, in a CPU run's order
  torch::manual_seed(9);
  const auto a = torch::randn({7}, torch::TensorOptions().device(checked()));
  torch::manual_seed(9);
  EXPECT_TRUE(torch::equal(a.to(torch::kCPU), torch::randn({7})));
}

TEST(CheckedDevice, StopsAnOperationGivenACpuTensorAndNamesTheOperator) {
  auto w = torch::randn({10, 4}).to(checked());
  EXPECT_MIMIC_ERROR(torch::embedding(w, torch::tensor({1, 2})),
                     "--device cpu-checked: aten::index_select got a tensor on the CPU (Long[2] on cpu)");
  EXPECT_MIMIC_ERROR((void)(w + torch::ones({10, 4})), "aten::add got a tensor on the CPU (Float[10, 4] on cpu)");
  // what a GPU takes from the CPU as well: a 0-dimensional scalar, index lists, copies both ways
  EXPECT_NO_THROW((void)(w * torch::tensor(2.0f)));
  EXPECT_NO_THROW((void)w.index({torch::tensor({0, 3})}));
  EXPECT_NO_THROW(w.index_put_({torch::tensor({1})}, torch::zeros({4}, w.options())));
  // ... but not the values written, nor a CPU tensor indexed by the device's indices
  EXPECT_MIMIC_ERROR(w.index_put_({torch::tensor({1, 2})}, torch::ones({2, 4})), "got a tensor on the CPU (Float[2, 4] on cpu)");
  EXPECT_MIMIC_ERROR((void)torch::ones({5}).index({torch::tensor({1}).to(checked())}), "got a tensor on the CPU (Float[5] on cpu)");
  EXPECT_NO_THROW((void)w.to(torch::kCPU));
  EXPECT_TRUE(torch::equal(w.index({torch::tensor({1})}).to(torch::kCPU), torch::zeros({1, 4})));
}

TEST(CheckedDevice, InPlaceViewsAndResizedOutputsWriteTheCallersTensor) {
  auto base = torch::arange(6, torch::TensorOptions().dtype(torch::kFloat)).to(checked());
  auto view = base.view({2, 3}).transpose(0, 1);
  view.add_(1);
  view.select(0, 1).mul_(10);  // base[1] and base[4]
  EXPECT_TRUE(torch::equal(base.to(torch::kCPU), torch::tensor({1.f, 20.f, 3.f, 4.f, 50.f, 6.f})));
  auto out = torch::empty({0}, torch::TensorOptions().device(checked()));
  const auto a = torch::randn({2, 3}), b = torch::randn({3, 4});
  at::mm_out(out, a.to(checked()), b.to(checked()));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 4})) << "the caller's tensor follows its resized CPU view";
  EXPECT_EQ(out.device(), checked());
  EXPECT_TRUE(torch::equal(out.to(torch::kCPU), a.mm(b)));
  // a view shares its base's storage, which follows the base when a resize reallocates it
  auto grown = torch::zeros({4}).to(checked());
  auto head = grown.narrow(0, 0, 2);
  EXPECT_TRUE(head.is_alias_of(grown));
  grown.resize_({1000});
  EXPECT_EQ(head.storage().nbytes(), 4000u);
  grown.fill_(7);
  EXPECT_EQ(head.to(torch::kCPU)[1].item<float>(), 7.f);
  auto parts = torch::cat({base, base}).split(4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].device(), checked());
  EXPECT_EQ(parts[1].to(torch::kCPU)[1].item<float>(), 6.f);
}

// Inference mode (views of normal tensors are normal tensors there) and complex numbers' lazy conjugation and
// negation, as on the CPU.
TEST(CheckedDevice, InferenceModeAndConjugateViewsComputeTheCpusValues) {
  torch::manual_seed(2);
  torch::nn::Linear cpu(5, 3), dev(5, 3);
  {
    torch::NoGradGuard ng;
    dev->weight.copy_(cpu->weight);
    dev->bias.copy_(cpu->bias);
  }
  dev->to(checked());
  const auto x = torch::randn({4, 5});
  at::Tensor a, b;
  {
    c10::InferenceMode inference;
    a = cpu->forward(x).view({-1});
    b = dev->forward(x.to(checked())).view({-1});
    EXPECT_EQ(dev->weight.reshape({-1}).sum().item<float>(), cpu->weight.reshape({-1}).sum().item<float>());
  }
  EXPECT_TRUE(b.is_inference());
  EXPECT_TRUE(torch::equal(b.to(torch::kCPU), a));
  const auto c = torch::randn({3, 3}, torch::kComplexFloat);
  const auto cd = c.to(checked());
  EXPECT_TRUE(torch::equal(cd.conj().clone().to(torch::kCPU), c.conj().clone()));
  EXPECT_TRUE(torch::equal(cd.conj().mm(cd).to(torch::kCPU), c.conj().mm(c)));
  EXPECT_TRUE(torch::equal(torch::imag(cd.conj()).clone().to(torch::kCPU), torch::imag(c.conj()).clone()));
}

// A raw read must go through mimic::host (a GPU tensor's data pointer is device memory): the stand-in's data pointer
// is not its memory's address, so reading it crashes rather than passing on the checked CPU and failing on a GPU.
TEST(CheckedDevice, ADataPointerIsNotTheMemoryAndHostIsTheWayToTheBytes) {
  const auto t = torch::tensor({1.5f, -2.f}).to(checked());
  EXPECT_NE(t.data_ptr(), mimic::host(t).data_ptr());
  EXPECT_EQ(mimic::host(t).data_ptr<float>()[1], -2.f);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
#ifdef MIMIC_TEST_UNDER_ASAN
        __sanitizer_set_report_path("stderr");
#endif
        std::printf("%f\n", static_cast<double>(*static_cast<volatile float*>(t.data_ptr())));
      },
      "");
}

TEST(CheckedDevice, IsTheDeviceOptionsCpuCheckedNeverAutoAndRefusesBf16) {
  EXPECT_EQ(mimic::resolve_device("cpu-checked"), checked());
  EXPECT_TRUE(mimic::is_checked_device(mimic::resolve_device("cpu-checked")));
  EXPECT_FALSE(mimic::is_checked_device(mimic::resolve_device("auto")));
  EXPECT_EQ(mimic::device_label(checked()), "cpu-checked");
  EXPECT_EQ(mimic::device_label(c10::Device(c10::kCPU)), "cpu");
  EXPECT_TRUE(mimic::computes_on_cpu(checked()));
  EXPECT_MIMIC_ERROR(mimic::AutocastGuard(mimic::Precision::Bf16, checked()),
                     "--precision bf16 (autocast) runs on a CUDA device or the CPU, not on cpu-checked");
  EXPECT_MIMIC_ERROR(mimic::resolve_device("cpu-check"), "known: auto, cpu, cuda, cuda:N, cpu-checked");
}

}  // namespace
