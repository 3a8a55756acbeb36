#!/usr/bin/python3
"""An ordinary NumPy program (Debian's python3-numpy calls cblas_sgemm/dgemm of libblas.so.3),
run by run_interposed.py plain, under `tunableop run` and disabled. Checks each product against
float64 and writes the outputs for the driver (blocks: uint64 count, float64 tolerance, values).
  numpy_program.py OUT      exit 0: all correct; 77: no NumPy here
"""
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed")
    sys.exit(77)


def uses_libblas():
    """Debian's NumPy links libblas.so.3; pip wheels bundle an ILP64 OpenBLAS we do not hook."""
    with open("/proc/self/maps") as f:
        return "libblas.so" in f.read()


def engine_loaded():
    with open("/proc/self/maps") as f:
        return int("libtunableop_interpose" in f.read())


def main():
    if not uses_libblas():
        print("this NumPy (%s) does not call libblas.so.3" % np.__file__)
        sys.exit(77)
    out = open(sys.argv[1], "wb")
    rng = np.random.default_rng(0)
    ok = True

    def emit(name, got, want, tol):
        nonlocal ok
        err = float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30))
        if not err <= tol:
            print("%s: relative error %.3g > %.3g" % (name, err, tol), file=sys.stderr)
            ok = False
        flat = np.ascontiguousarray(got, dtype=np.float64).ravel()
        out.write(struct.pack("<Qd", flat.size, tol))
        out.write(flat.tobytes())

    def mat(r, c, dtype):
        return rng.standard_normal((r, c)).astype(dtype)

    def ref(x, y):  # float64 by NumPy's own loops (einsum does not call BLAS): no extra problems
        return np.einsum("ik,kj->ij", x.astype(np.float64), y.astype(np.float64))

    # Every product below is a distinct BLAS problem (shapes differ), so each adds one results line.
    problems = 0
    f32 = np.float32
    a, b = mat(48, 96, f32), mat(96, 40, f32)
    emit("C-order fp32", a @ b, ref(a, b), 1e-5)
    problems += 1
    emit("repeat", a @ b, ref(a, b), 1e-5)  # same problem
    a2, b2 = np.asfortranarray(mat(33, 70, f32)), mat(70, 21, f32)
    emit("F-order A", a2 @ b2, ref(a2, b2), 1e-5)
    problems += 1
    a3 = mat(57, 29, f32)  # used transposed: a view, no copy
    b3 = np.asfortranarray(mat(57, 31, f32))
    emit("A.T @ F-order B", a3.T @ b3, ref(a3.T, b3), 1e-5)
    problems += 1
    d1, d2 = mat(25, 45, np.float64), mat(45, 35, np.float64)
    emit("fp64", d1 @ d2, ref(d1, d2), 1e-12)
    problems += 1
    c = np.empty((48, 40), dtype=f32)
    np.matmul(a, b, out=c)
    emit("out=", c, ref(a, b), 1e-5)
    # A small MLP (fp32): two more problems.
    x, w1, w2 = mat(16, 64, f32), mat(64, 128, f32), mat(128, 10, f32)
    h = np.maximum(x @ w1, 0)
    y = h @ w2
    emit("mlp", y, ref(np.maximum(ref(x, w1), 0), w2), 1e-4)
    problems += 2
    out.close()
    print("servable_problems=%d engine_loaded=%d" % (problems, engine_loaded()))
    print("all results correct" if ok else "WRONG RESULTS")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
