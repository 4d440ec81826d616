"""(detectors)"""
