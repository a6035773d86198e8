// A Tour of Go: Exercise: Equivalent Binary Trees -- https://go.dev/tour/concurrency/7 and
// https://go.dev/tour/concurrency/8
//
// Many binary trees can hold the same sequence of values. walk() sends a tree's values in order
// on a channel; same() walks two trees concurrently and compares the sequences.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>
#include <weft/weft.hpp>

// golang.org/x/tour/tree: a binary search tree, and New(k), a randomly shaped one holding
// k, 2k, ..., 10k.
struct Tree {
  std::unique_ptr<Tree> left;
  int value;
  std::unique_ptr<Tree> right;
};

std::unique_ptr<Tree> insert(std::unique_ptr<Tree> t, int v) {
  if (!t) return std::make_unique<Tree>(Tree{nullptr, v, nullptr});
  if (v < t->value) {
    t->left = insert(std::move(t->left), v);
  } else {
    t->right = insert(std::move(t->right), v);
  }
  return t;
}

std::unique_ptr<Tree> new_tree(int k) {
  std::vector<int> perm(10);
  std::iota(perm.begin(), perm.end(), 1);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(std::random_device()()));
  std::unique_ptr<Tree> t;
  for (int v : perm) t = insert(std::move(t), v * k);
  return t;
}

// walk sends all values of the tree t to ch, in order, then closes ch.
void walk_values(const Tree* t, const weft::Chan<int>& ch) {
  if (!t) return;
  walk_values(t->left.get(), ch);
  ch.send(t->value);
  walk_values(t->right.get(), ch);
}
void walk(const Tree* t, weft::Chan<int> ch) {
  walk_values(t, ch);
  ch.close();
}

// same reports whether the trees t1 and t2 contain the same values. It reads both channels to the
// end even after a difference, so that neither walker is left parked on a send forever.
bool same(const Tree* t1, const Tree* t2) {
  weft::Chan<int> c1, c2;
  weft::go(walk, t1, c1);
  weft::go(walk, t2, c2);
  bool equal = true;
  for (;;) {
    const std::optional<int> v1 = c1.recv();
    const std::optional<int> v2 = c2.recv();
    if (v1 != v2) equal = false;
    if (!v1 && !v2) return equal;
  }
}

int main() {
  weft::run([] {
    const std::unique_ptr<Tree> t = new_tree(1);
    weft::Chan<int> ch;
    weft::go(walk, t.get(), ch);
    std::string values;
    for (int v : ch) {
      values += ' ';
      values += std::to_string(v);
    }
    std::printf("walk(new_tree(1)):%s\n", values.c_str());

    std::printf("same(new_tree(1), new_tree(1)): %s\n",
                same(new_tree(1).get(), new_tree(1).get()) ? "true" : "false");
    std::printf("same(new_tree(1), new_tree(2)): %s\n",
                same(new_tree(1).get(), new_tree(2).get()) ? "true" : "false");
  });
}
