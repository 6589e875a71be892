"""The planner on a simulated cluster and clock: `world.World` plays the kubelet, the
exporters, the lease controller and the runtime's steps; `simulate` replays a
lease-demand trace through it; `simreport` makes the summary table and the plot.
"""
