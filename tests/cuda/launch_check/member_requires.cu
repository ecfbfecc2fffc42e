// A reproducer of an nvcc 13.0 behaviour that scripts/check-cuda-launches.py must find: in a member
// function of a class template, a requires-expression that calls a member through the implicit
// `this` (slot() here) is false for nvcc's front end and true for the host compiler, so the host
// launches kernel<float>, for which no device code was made ("invalid device function" on a GPU).
// ctnn writes such conditions as concepts at namespace scope (train/model.hpp: detail::adds_penalty).
template <class T>
__global__ void kernel(T* p) {
  *p = T(1);
}
template <class T>
struct hooked {
  static void hook(T* p) { kernel<<<1, 1>>>(p); }
};
template <class T>
struct owner {
  T* slot() { return nullptr; }
  template <class V>
  void call() {
    if constexpr (requires { V::hook(slot()); }) V::hook(slot());
  }
};
int main() { owner<float>{}.call<hooked<float>>(); }
