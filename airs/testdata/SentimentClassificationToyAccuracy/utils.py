def accuracy(predictions, labels):
    correct = sum(1 for p, y in zip(predictions, labels) if int(p) == int(y))
    return correct / len(labels)
