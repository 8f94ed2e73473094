#!/usr/bin/env python3
"""Makes GADGET-4-style (SnapFormat 3) HDF5 files for kfmm's io tests, and checks files kfmm wrote.

  make_gadget4_file.py make VARIANT OUT N   write a file as GADGET-4 would (VARIANT "gadget4") or a
                                            broken one (see VARIANTS) with N particles
  make_gadget4_file.py check FILE N PRECISION [fields]
                                            check that kfmm's FILE has GADGET-4's layout, types and
                                            attributes (PRECISION: float or double; "fields": it
                                            also has Potential and Acceleration)

Particle i (0-based) of "make": id i + 1 (uint32), position (i/2, -i, i/4), velocity (i/8, 2i/8, 3i/8)
(all exact in float32), mass 0.125 from /Header MassTable[1]. Exit status 0 on success.
"""
import sys

import h5py
import numpy as np

UNIT_LENGTH = 3.085678e21
UNIT_MASS = 1.989e43
UNIT_VELOCITY = 1e5
MASS = 0.125
TIME = 0.5

VARIANTS = ["gadget4", "missing_velocities", "coordinates_2d", "count_mismatch", "nan_coordinate",
            "negative_mass", "no_masses", "missing_header", "not_hdf5",
            # found by fuzz_tests/fuzz_particle_file:
            "unwritten_coordinates", "huge_unwritten", "array_parameter", "negative_ids", "nan_unit", "infinite_time",
            "zero_gravity_units", "signed_ids"]


def units(dataset, length, mass, velocity, to_cgs):
    for name, value in [("a_scaling", 0.0), ("h_scaling", 0.0), ("length_scaling", float(length)),
                        ("mass_scaling", float(mass)), ("velocity_scaling", float(velocity)),
                        ("to_cgs", float(to_cgs))]:
        dataset.attrs.create(name, value, dtype="f8")


def fixed_string(value):
    # GADGET-4 writes fixed-length NULLTERM ASCII strings of STRSIZE = length.
    return np.array(value.encode("ascii"), dtype="S%d" % max(1, len(value)))


def make(variant, out, n):
    if variant == "not_hdf5":
        with open(out, "w") as f:
            f.write("this is not an HDF5 file\n")
        return
    # Datasets declared for 2^40 particles but never written (no storage in the file).
    declared = n
    if variant == "huge_unwritten":
        declared = 1 << 40
    i = np.arange(n, dtype=np.float64)
    pos = np.stack([i / 2, -i, i / 4], axis=1).astype("f4")
    vel = np.stack([i / 8, 2 * i / 8, 3 * i / 8], axis=1).astype("f4")
    ids = np.arange(1, n + 1, dtype="u4")
    with h5py.File(out, "w") as f:
        if variant != "missing_header":
            h = f.create_group("Header")
            total = n + 1 if variant == "count_mismatch" else declared
            h.attrs.create("NumPart_ThisFile", [0, declared, 0, 0, 0, 0], dtype="u8")
            h.attrs.create("NumPart_Total", [0, total, 0, 0, 0, 0], dtype="u8")
            table_mass = 0.0 if variant in ("no_masses", "negative_mass") else MASS
            h.attrs.create("MassTable", [0, table_mass, 0, 0, 0, 0], dtype="f8")
            h.attrs.create("Time", np.inf if variant == "infinite_time" else TIME, dtype="f8")
            h.attrs.create("Redshift", 0.0, dtype="f8")
            h.attrs.create("BoxSize", 0.0, dtype="f8")
            h.attrs.create("NumFilesPerSnapshot", 1, dtype="i4")
            h.attrs["Git_commit"] = fixed_string("0c08b22567074b6009f323660f3f75f16e25a994")
        p = f.create_group("Parameters")
        p.attrs.create("UnitLength_in_cm", np.nan if variant == "nan_unit" else UNIT_LENGTH, dtype="f8")
        # A mass unit so small that the derived G underflows to 0.
        p.attrs.create("UnitMass_in_g", 1e-320 if variant == "zero_gravity_units" else UNIT_MASS, dtype="f8")
        p.attrs.create("UnitVelocity_in_cm_per_s", UNIT_VELOCITY, dtype="f8")
        p.attrs.create("GravityConstantInternal", 0.0, dtype="f8")
        p.attrs.create("ErrTolTheta", 0.5, dtype="f8")
        p.attrs.create("MaxMemSize", [2000, 4000, 8000] if variant == "array_parameter" else 2000, dtype="i4")
        p.attrs["SnapshotFileBase"] = fixed_string("snapshot")
        c = f.create_group("Config")
        c.attrs.create("DOUBLEPRECISION", 1.0, dtype="f8")
        c.attrs["FMM"] = fixed_string("")
        t = f.create_group("PartType1")
        if variant == "coordinates_2d":
            pos = pos[:, :2]
        if variant == "nan_coordinate":
            pos[3, 1] = np.nan
        if variant in ("unwritten_coordinates", "huge_unwritten"):
            d = t.create_dataset("Coordinates", shape=(declared, 3), dtype="f4")  # shape only, no data
        else:
            d = t.create_dataset("Coordinates", data=pos)
        units(d, 1, 0, 0, UNIT_LENGTH)
        if variant == "huge_unwritten":
            d = t.create_dataset("Velocities", shape=(declared, 3), dtype="f4")
        elif variant != "missing_velocities":
            d = t.create_dataset("Velocities", data=vel)
            units(d, 0, 0, 1, UNIT_VELOCITY)
        if variant in ("negative_ids", "signed_ids"):
            ids = ids.astype("i4")
        if variant == "negative_ids":
            ids[5] = -5
        if variant == "huge_unwritten":
            t.create_dataset("ParticleIDs", shape=(declared,), dtype="u4")
        else:
            t.create_dataset("ParticleIDs", data=ids)
        if variant == "negative_mass":
            masses = np.full(n, MASS, dtype="f4")
            masses[2] = -1.0
            d = t.create_dataset("Masses", data=masses)
            units(d, 0, 1, 0, UNIT_MASS)


def check(path, n, precision, with_fields):
    problems = []

    def expect(condition, what):
        if not condition:
            problems.append(what)

    float_type = np.dtype("f4") if precision == "float" else np.dtype("f8")
    with h5py.File(path, "r") as f:
        expect({"Header", "Parameters", "Config", "PartType1"} <= set(f.keys()), "groups: %s" % list(f.keys()))
        h = f["Header"].attrs
        for name, dtype in [("NumPart_ThisFile", "u8"), ("NumPart_Total", "u8"), ("MassTable", "f8")]:
            expect(h[name].dtype == np.dtype(dtype) and h[name].shape == (6,),
                   "%s is %s %s" % (name, h[name].dtype, h[name].shape))
        expect(list(h["NumPart_Total"]) == [0, n, 0, 0, 0, 0], "NumPart_Total %s" % h["NumPart_Total"])
        expect(list(h["NumPart_ThisFile"]) == [0, n, 0, 0, 0, 0], "NumPart_ThisFile %s" % h["NumPart_ThisFile"])
        for name in ["Time", "Redshift", "BoxSize"]:
            expect(h[name].dtype == np.dtype("f8") and np.shape(h[name]) == (), "%s is %s" % (name, h[name].dtype))
        expect(h["NumFilesPerSnapshot"].dtype == np.dtype("i4") and h["NumFilesPerSnapshot"] == 1,
               "NumFilesPerSnapshot %s" % h["NumFilesPerSnapshot"])
        p = f["Parameters"].attrs
        for name in ["UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s", "GravityConstantInternal"]:
            expect(name in p and p[name].dtype == np.dtype("f8"), "/Parameters %s" % name)
        expect(p["NumSteps"].dtype == np.dtype("i4") and p["NumSteps"] == 12, "/Parameters NumSteps (int32 12)")
        expect(p["RunName"] == b"unit-test", "/Parameters RunName %r" % p.get("RunName"))
        t = f["PartType1"]
        expected = {"Coordinates": ((n, 3), float_type, (1, 0, 0), p["UnitLength_in_cm"]),
                    "Velocities": ((n, 3), float_type, (0, 0, 1), p["UnitVelocity_in_cm_per_s"]),
                    "Masses": ((n,), float_type, (0, 1, 0), p["UnitMass_in_g"])}
        if with_fields:
            v = p["UnitVelocity_in_cm_per_s"]
            expected["Potential"] = ((n,), float_type, (0, 0, 2), v * v)
            expected["Acceleration"] = ((n, 3), float_type, (-1, 0, 2), v * v / p["UnitLength_in_cm"])
        for name, (shape, dtype, (length, mass, velocity), to_cgs) in expected.items():
            if name not in t:
                problems.append("missing /PartType1/%s" % name)
                continue
            d = t[name]
            expect(d.shape == shape and d.dtype == dtype, "%s is %s %s" % (name, d.shape, d.dtype))
            a = d.attrs
            for attr, value in [("a_scaling", 0), ("h_scaling", 0), ("length_scaling", length),
                                ("mass_scaling", mass), ("velocity_scaling", velocity)]:
                expect(attr in a and a[attr].dtype == np.dtype("f8") and a[attr] == value,
                       "%s.%s = %s, expected %s" % (name, attr, a.get(attr), value))
            expect("to_cgs" in a and abs(a["to_cgs"] / to_cgs - 1) < 1e-12,
                   "%s.to_cgs = %s, expected %s" % (name, a.get("to_cgs"), to_cgs))
        ids = t["ParticleIDs"]
        expect(ids.dtype == np.dtype("u8") and ids.shape == (n,), "ParticleIDs is %s %s" % (ids.shape, ids.dtype))
        expect(len(set(ids[:].tolist())) == n, "ParticleIDs are not unique")
        expect(bool(np.all(np.isfinite(t["Coordinates"][:]))), "Coordinates not finite")
    if problems:
        print("h5py check of %s failed:\n  %s" % (path, "\n  ".join(problems)))
        return 1
    print("h5py check of %s: OK" % path)
    return 0


def main(argv):
    if len(argv) >= 4 and argv[0] == "make" and argv[1] in VARIANTS:
        make(argv[1], argv[2], int(argv[3]))
        return 0
    if len(argv) >= 4 and argv[0] == "check":
        return check(argv[1], int(argv[2]), argv[3], len(argv) > 4 and argv[4] == "fields")
    print(__doc__, "variants:", ", ".join(VARIANTS))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
