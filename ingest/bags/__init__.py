"""twinlake.ingest.bags: ROS 1 and ROS 2 bags (read with rosbags) into the lake, one run per
arm. Public API: `BagReader` (the `ros_bag` reader, registered when `reader` is imported,
which `registry.FORMAT_MODULES` does). See README.md and docs/formats.md §9."""

from .reader import BagReader

__all__ = ["BagReader"]
