#include "sched/image_fit.h"

#include <gtest/gtest.h>

#include <map>

#include "sched/framework.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

TEST(ImageFitTest, OnlyNodesWithTheImageAreChosen) {
  NodeSpec with = Node("with", 8000, 2, "T4");
  with.images = {"localhost/busybox:latest", "localhost/pytorch:bookworm"};
  NodeSpec other = Node("other", 8000, 8, "T4");  // more room: BestFit alone would not prefer "with"
  other.images = {"localhost/pytorch:bookworm"};
  auto c = Cluster::Create({other, Node("bare", 8000, 8, "T4"), with});
  ASSERT_TRUE(c.ok());
  auto fw = BestFitFramework(&*c);
  ASSERT_NE(fw, nullptr);
  AcceptAllBinder binder;
  Request r = Req("r", Shape(0, 1, 1000));
  r.image = "localhost/busybox:latest";
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
  EXPECT_EQ(d->placements[0].node, 2);
  // Without an image the request may go anywhere.
  d = fw->Schedule(Req("plain", Shape(0, 1, 1000)), binder);
  ASSERT_TRUE(d.ok() && d->scheduled);
}

TEST(ImageFitTest, TheReasonNamesTheMissingImage) {
  NodeSpec other = Node("other", 8000, 2, "T4");
  other.images = {"localhost/pytorch:bookworm"};
  NodeSpec two = Node("two", 8000, 2, "T4");
  two.images = {"localhost/a:latest", "localhost/b:latest"};
  auto c = Cluster::Create({other, Node("bare", 8000, 2, "T4"), two});
  ASSERT_TRUE(c.ok());
  auto fw = BestFitFramework(&*c);
  ASSERT_NE(fw, nullptr);
  AcceptAllBinder binder;
  Request r = Req("r", Shape(0, 1, 1000));
  r.image = "localhost/busybox:latest";
  auto d = fw->Schedule(r, binder);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->scheduled);
  std::map<NodeIndex, std::string> why;
  for (const NodeReason& reason : d->reasons) why[reason.node] = reason.plugin + ": " + reason.reason;
  ASSERT_EQ(why.size(), 3u);
  EXPECT_EQ(why[0], "ImageFit: image localhost/busybox:latest is not on this node (it has 1 other image)");
  EXPECT_EQ(why[1], "ImageFit: image localhost/busybox:latest is not on this node (it runs no containers)");
  EXPECT_EQ(why[2], "ImageFit: image localhost/busybox:latest is not on this node (it has 2 other images)");
}

}  // namespace
}  // namespace gpugeek::sched
