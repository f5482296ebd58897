"""setup.py - generates charter_client/charter_pb2.py with protoc while the wheel is built.

The generated module is not kept in the repository: it is made from proto/charter.proto by the
protoc that matches the protobuf runtime the wheel installs against (Debian's protobuf-compiler
and python3-protobuf are one source package), so it is never stale and never of another
protoc's dialect. The proto is found at CHARTER_PROTO_DIR, else ../../proto beside this file.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithProtoc(build_py):
    """build_py, then protoc --python_out into the built package."""

    def run(self):
        super().run()
        proto_dir = os.environ.get("CHARTER_PROTO_DIR") or os.path.join(HERE, "..", "..", "proto")
        proto = os.path.join(proto_dir, "charter.proto")
        if not os.path.isfile(proto):
            raise SystemExit(f"charter-client: {proto} not found "
                             "(build from the charter source tree, or set CHARTER_PROTO_DIR)")
        protoc = shutil.which("protoc")
        if protoc is None:
            raise SystemExit("charter-client: protoc not found (apt-get install protobuf-compiler)")
        out = os.path.join(self.build_lib, "charter_client")
        os.makedirs(out, exist_ok=True)
        subprocess.run([protoc, f"--proto_path={proto_dir}", f"--python_out={out}",
                        "charter.proto"], check=True)


setup(cmdclass={"build_py": BuildWithProtoc})
