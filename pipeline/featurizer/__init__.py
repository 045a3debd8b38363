"""HLO programs as TpuGraphs graphs: the library of command `featurize` (`dataset`), shared with command predict."""
