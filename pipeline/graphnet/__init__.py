"""The graph neural network cost model: data, layers, model, training (`train_loop`, `gst`) and its one inference
entry point (`scoring`: load the members stage gnn saved, score graphs, blend the seed ensemble)."""
