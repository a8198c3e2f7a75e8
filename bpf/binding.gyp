{
  "targets": [
    {
      "target_name": "canopy_bpf",
      "sources": ["addon/canopy_bpf.c"],
      "cflags": ["-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
      "libraries": ["-lbpf"]
    }
  ]
}
