"""The digest library: NNTP client, overview parser, subjects, gathering lines into files and
releases, rules, the batch codec and the range loop.

It is shared by the edge node and by the data center's own runner (`flask seed range`), so it
imports only msgpack and the standard library, and nothing of edge.node.
"""
