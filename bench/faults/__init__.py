"""The fault campaign's pieces (``bench/fault_campaign.py`` dispatches to them).

Each fault kind is a module with a ``FAULT`` (``faults.fault.Fault``) named in
``faults.registry``; the shared harness (broker, job process, load, checks) is in
the other modules. docs/faults.md describes the campaign.
"""
