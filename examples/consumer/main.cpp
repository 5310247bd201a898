// Uses the installed mimic library: loads a model directory, tokenizes a text and runs the model.
//   consumer MODEL_DIR "some text"
#include <mimic/core/error.h>
#include <mimic/models/model.h>
#include <mimic/text/tokenizer.h>
#include <torch/torch.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: consumer MODEL_DIR TEXT\n";
    return 2;
  }
  try {
    auto tokenizer = mimic::text::load_tokenizer(argv[1]);
    auto model = mimic::models::load_model(argv[1]);
    auto ids = tokenizer->encode(argv[2]);
    torch::NoGradGuard no_grad;
    auto out = model->forward({torch::tensor(ids, torch::kLong).unsqueeze(0), {}, {}});
    std::cout << model->summary().model_type << " tokens=" << ids.size()
              << " hidden=" << out.last_hidden_state.sizes() << "\n";
  } catch (const mimic::Error& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
