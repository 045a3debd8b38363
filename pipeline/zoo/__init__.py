"""The program zoo: hand-written JAX training steps of many architecture families (the built-in dataset's
programs). `registry.programs` lists a dataset's programs; `common.lowered_text` / `common.compiled_text` give their HLO texts."""
