#!/usr/bin/env bash
# The main job: convert the offline default dataset (scikit-learn's bundled
# handwritten digits) to TFRecords, train LeNet on it, evaluate it.
# Environment overrides: DATA_DIR, TRAIN_DIR, MODEL_NAME, STEPS, NUM_CLONES.
set -e
cd "$(dirname "$0")"
. ./setup_env.sh
DATA_DIR="${DATA_DIR:-data/digits}"
MODEL_NAME="${MODEL_NAME:-lenet}"
TRAIN_DIR="${TRAIN_DIR:-runs/${MODEL_NAME}_digits}"
STEPS="${STEPS:-800}"
NUM_CLONES="${NUM_CLONES:-1}"
EVAL_LOG="$TRAIN_DIR/eval/during_training.log"
start=$(date +%s)
python download_and_convert_data.py --dataset_name=digits --dataset_dir="$DATA_DIR"
# The evaluator follows training: each new checkpoint is evaluated once (the
# evaluation curve in TensorBoard); it stops after the last step. Its lines go
# to $EVAL_LOG; the last evaluation is shown at the end.
mkdir -p "$(dirname "$EVAL_LOG")"
python eval_image_classifier.py --dataset_name=digits --dataset_dir="$DATA_DIR" \
  --dataset_split_name=validation --model_name="$MODEL_NAME" --checkpoint_path="$TRAIN_DIR" \
  --wait_for_checkpoints --eval_interval_secs=1 --stop_at_step="$STEPS" > "$EVAL_LOG" 2>&1 &
evaluator=$!
trap 'kill $evaluator 2>/dev/null || true' EXIT
python train_image_classifier.py --dataset_name=digits --dataset_dir="$DATA_DIR" \
  --dataset_split_name=train --model_name="$MODEL_NAME" --train_dir="$TRAIN_DIR" \
  --max_number_of_steps="$STEPS" --batch_size=50 --optimizer=sgd \
  --learning_rate=0.01 --learning_rate_decay_type=fixed --weight_decay=0 \
  --num_clones="$NUM_CLONES" --clone_on_cpu="$([ "$NUM_CLONES" -gt 1 ] && echo true || echo false)" \
  --log_every_n_steps=100 --save_summaries_steps=20 --save_interval_secs=10 \
  --random_seed=0
wait "$evaluator" || { cat "$EVAL_LOG" >&2; exit 1; }
trap - EXIT
# The evaluation of the last checkpoint, as the evaluator printed it.
awk '/^Evaluated /{block=""} {block=block $0 "\n"} END{printf "%s", block}' "$EVAL_LOG"
echo "Main job took $(( $(date +%s) - start )) s"
echo "Watch it: . ./setup_env.sh && tensorboard --logdir $(dirname "$TRAIN_DIR")  (then open http://localhost:6006)"
