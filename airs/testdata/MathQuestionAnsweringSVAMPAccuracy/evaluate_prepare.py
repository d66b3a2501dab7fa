# evaluate_prepare.py of the paper's example task (appendix B), a stand-in for tests
