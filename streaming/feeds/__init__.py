"""What feeds the job its input topics: collectors of real clusters, the simulator, and the
wire form and publisher they share."""
