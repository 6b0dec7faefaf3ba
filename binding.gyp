{
  "targets": [
    {
      "target_name": "troupe_memory",
      "sources": ["native/memory.cc"]
    }
  ]
}
