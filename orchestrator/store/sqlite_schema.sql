CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
)
;
CREATE TABLE analytics_days (
	series INTEGER NOT NULL, 
	day INTEGER NOT NULL, 
	agent VARCHAR NOT NULL, 
	first_record BIGINT NOT NULL, 
	runs BIGINT NOT NULL, 
	gated_runs BIGINT NOT NULL, 
	gate_passes BIGINT NOT NULL, 
	attempts BIGINT NOT NULL, 
	failures BIGINT NOT NULL, 
	gate_failures BIGINT NOT NULL, 
	retries BIGINT NOT NULL, 
	model_records BIGINT NOT NULL, 
	model_calls BIGINT NOT NULL, 
	input_tokens BIGINT NOT NULL, 
	output_tokens BIGINT NOT NULL, 
	priced_records BIGINT NOT NULL, 
	cost FLOAT NOT NULL, 
	skipped_runs BIGINT DEFAULT '0' NOT NULL, 
	PRIMARY KEY (series, day)
)
 WITHOUT ROWID


;
CREATE TABLE analytics_inputs (
	series INTEGER NOT NULL, 
	inputs VARCHAR NOT NULL, 
	runs INTEGER NOT NULL, 
	output VARCHAR, 
	varied BOOLEAN NOT NULL, 
	PRIMARY KEY (series, inputs)
)
 WITHOUT ROWID


;
CREATE TABLE analytics_outcomes (
	id INTEGER NOT NULL, 
	workflow VARCHAR NOT NULL, 
	day INTEGER NOT NULL, 
	incorrect BOOLEAN NOT NULL, 
	blamed_step VARCHAR, 
	method VARCHAR, 
	runs BIGINT NOT NULL, 
	PRIMARY KEY (id)
)
;
CREATE TABLE analytics_runs (
	run_pk INTEGER NOT NULL, 
	workflow VARCHAR NOT NULL, 
	started_at FLOAT NOT NULL, 
	steps INTEGER NOT NULL, 
	attempts INTEGER NOT NULL, 
	incorrect BOOLEAN NOT NULL, 
	blamed_step VARCHAR, 
	method VARCHAR, 
	PRIMARY KEY (run_pk)
)
;
CREATE TABLE analytics_series (
	id INTEGER NOT NULL, 
	workflow VARCHAR NOT NULL, 
	step_id VARCHAR NOT NULL, 
	repeated INTEGER NOT NULL, 
	varied INTEGER NOT NULL, 
	not_covered INTEGER NOT NULL, 
	first_output BIGINT, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_analytics_series_step UNIQUE (workflow, step_id)
)
;
CREATE TABLE analytics_state (
	id INTEGER NOT NULL, 
	runs BIGINT NOT NULL, 
	records BIGINT NOT NULL, 
	outcomes BIGINT NOT NULL, 
	attributions BIGINT NOT NULL, 
	PRIMARY KEY (id)
)
;
CREATE TABLE analytics_trajectories (
	workflow VARCHAR NOT NULL, 
	steps INTEGER NOT NULL, 
	attempts INTEGER NOT NULL, 
	runs BIGINT NOT NULL, 
	PRIMARY KEY (workflow, steps, attempts)
)
 WITHOUT ROWID


;
CREATE TABLE attributions (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	outcome_id INTEGER, 
	method VARCHAR NOT NULL, 
	params TEXT NOT NULL, 
	step_credits TEXT NOT NULL, 
	agent_credits TEXT NOT NULL, 
	blamed_step VARCHAR, 
	confidence FLOAT, 
	evidence TEXT NOT NULL, 
	cost INTEGER NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id), 
	FOREIGN KEY(outcome_id) REFERENCES outcomes (id)
)
;
CREATE TABLE dataset_examples (
	id INTEGER NOT NULL, 
	dataset_id INTEGER NOT NULL, 
	version INTEGER NOT NULL, 
	position INTEGER NOT NULL, 
	inputs TEXT NOT NULL, 
	reference TEXT, 
	label TEXT, 
	source_run_id VARCHAR, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(dataset_id) REFERENCES datasets (id)
)
;
CREATE TABLE datasets (
	id INTEGER NOT NULL, 
	name VARCHAR NOT NULL, 
	version INTEGER NOT NULL, 
	description TEXT, 
	created_at FLOAT NOT NULL, 
	updated_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name)
)
;
CREATE TABLE experiment_runs (
	id INTEGER NOT NULL, 
	experiment_id INTEGER NOT NULL, 
	example_id INTEGER NOT NULL, 
	run_id VARCHAR NOT NULL, 
	reused_steps TEXT NOT NULL, 
	saved_model_calls INTEGER NOT NULL, 
	saved_tokens BIGINT NOT NULL, 
	saved_cost FLOAT NOT NULL, 
	saved_seconds FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_experiment_runs_example UNIQUE (experiment_id, example_id), 
	FOREIGN KEY(experiment_id) REFERENCES experiments (id), 
	FOREIGN KEY(example_id) REFERENCES dataset_examples (id), 
	FOREIGN KEY(run_id) REFERENCES runs (run_id)
)
;
CREATE TABLE experiments (
	id INTEGER NOT NULL, 
	name VARCHAR NOT NULL, 
	dataset_id INTEGER NOT NULL, 
	dataset_version INTEGER NOT NULL, 
	workflow_id INTEGER NOT NULL, 
	workflow VARCHAR NOT NULL, 
	status VARCHAR NOT NULL, 
	params TEXT NOT NULL, 
	summary TEXT, 
	created_at FLOAT NOT NULL, 
	updated_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name), 
	FOREIGN KEY(dataset_id) REFERENCES datasets (id), 
	FOREIGN KEY(workflow_id) REFERENCES workflows (id)
)
;
CREATE TABLE gate_results (
	id INTEGER NOT NULL, 
	record_id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	step_id VARCHAR NOT NULL, 
	gate VARCHAR NOT NULL, 
	passed BOOLEAN NOT NULL, 
	score FLOAT, 
	reason TEXT NOT NULL, 
	details TEXT, 
	severity VARCHAR NOT NULL, 
	duration FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(record_id) REFERENCES step_records (id)
)
;
CREATE TABLE model_calls (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	record_id INTEGER, 
	step_id VARCHAR NOT NULL, 
	attempt INTEGER NOT NULL, 
	purpose VARCHAR NOT NULL, 
	gate VARCHAR, 
	provider VARCHAR NOT NULL, 
	model VARCHAR NOT NULL, 
	started_at FLOAT NOT NULL, 
	ended_at FLOAT NOT NULL, 
	input_tokens INTEGER NOT NULL, 
	output_tokens INTEGER NOT NULL, 
	cost FLOAT, 
	finish_reason VARCHAR, 
	error TEXT, 
	messages TEXT, 
	response TEXT, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id)
)
;
CREATE TABLE notifications (
	id INTEGER NOT NULL, 
	idempotency_key VARCHAR NOT NULL, 
	run_id VARCHAR NOT NULL, 
	workflow VARCHAR NOT NULL, 
	event VARCHAR NOT NULL, 
	target TEXT NOT NULL, 
	body TEXT NOT NULL, 
	status VARCHAR NOT NULL, 
	tries INTEGER NOT NULL, 
	last_error TEXT, 
	created_at FLOAT NOT NULL, 
	next_try_at FLOAT NOT NULL, 
	delivered_at FLOAT, 
	claimed_by VARCHAR, 
	claimed_until FLOAT, 
	PRIMARY KEY (id), 
	UNIQUE (idempotency_key)
)
;
CREATE TABLE outcomes (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	value FLOAT NOT NULL, 
	correct BOOLEAN, 
	source VARCHAR NOT NULL, 
	termination VARCHAR NOT NULL, 
	reason TEXT, 
	reviewer VARCHAR, 
	created_at FLOAT NOT NULL, 
	evaluator_reason TEXT, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id)
)
;
CREATE TABLE reviews (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	record_id INTEGER NOT NULL, 
	step_id VARCHAR NOT NULL, 
	decision VARCHAR NOT NULL, 
	reviewer VARCHAR NOT NULL, 
	comment TEXT, 
	output_before TEXT, 
	output_after TEXT, 
	forced BOOLEAN NOT NULL, 
	rerun_side_effects BOOLEAN, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_reviews_record UNIQUE (record_id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id), 
	FOREIGN KEY(record_id) REFERENCES step_records (id)
)
;
CREATE TABLE runs (
	id INTEGER NOT NULL, 
	run_id VARCHAR NOT NULL, 
	workflow_id INTEGER NOT NULL, 
	workflow VARCHAR NOT NULL, 
	status VARCHAR NOT NULL, 
	kind VARCHAR NOT NULL, 
	inputs TEXT NOT NULL, 
	output TEXT, 
	error TEXT, 
	parent_run_id VARCHAR, 
	parent_step VARCHAR, 
	owner VARCHAR, 
	heartbeat_at FLOAT, 
	trace_id VARCHAR, 
	lease_token VARCHAR, 
	lease_expires_at FLOAT, 
	created_at FLOAT NOT NULL, 
	updated_at FLOAT NOT NULL, 
	reference TEXT, 
	review_deadline FLOAT, 
	PRIMARY KEY (id), 
	UNIQUE (run_id), 
	FOREIGN KEY(workflow_id) REFERENCES workflows (id)
)
;
CREATE TABLE step_records (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	workflow_id INTEGER NOT NULL, 
	step_id VARCHAR NOT NULL, 
	step_type VARCHAR NOT NULL, 
	agent VARCHAR NOT NULL, 
	attempt INTEGER NOT NULL, 
	status VARCHAR NOT NULL, 
	origin VARCHAR NOT NULL, 
	started_at FLOAT NOT NULL, 
	ended_at FLOAT NOT NULL, 
	inputs TEXT, 
	output TEXT, 
	error_type VARCHAR, 
	error_message TEXT, 
	consumed TEXT, 
	injected TEXT, 
	llm TEXT, 
	inputs_digest VARCHAR, 
	output_digest VARCHAR, 
	gate_count INTEGER, 
	gates_failed INTEGER, 
	traceback TEXT, 
	superseded_by INTEGER, 
	item_index INTEGER, 
	skip_reason TEXT, 
	iteration INTEGER, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id)
)
;
CREATE TABLE workflows (
	id INTEGER NOT NULL, 
	name VARCHAR NOT NULL, 
	version VARCHAR NOT NULL, 
	content_hash VARCHAR NOT NULL, 
	definition TEXT NOT NULL, 
	source VARCHAR, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name, content_hash)
)
;
CREATE INDEX ix_analytics_outcomes_workflow_day ON analytics_outcomes (workflow, day)
;
CREATE INDEX ix_analytics_runs_workflow_start ON analytics_runs (workflow, started_at)
;
CREATE INDEX ix_attributions_run_pk ON attributions (run_pk)
;
CREATE INDEX ix_dataset_examples_dataset_version ON dataset_examples (dataset_id, version)
;
CREATE INDEX ix_gate_results_run_record ON gate_results (run_pk, record_id)
;
CREATE INDEX ix_model_calls_run ON model_calls (run_pk)
;
CREATE INDEX ix_notifications_due ON notifications (status, next_try_at)
;
CREATE INDEX ix_notifications_run ON notifications (run_id)
;
CREATE INDEX ix_outcomes_run_pk ON outcomes (run_pk)
;
CREATE INDEX ix_reviews_run_pk ON reviews (run_pk)
;
CREATE INDEX ix_runs_parent_run_id ON runs (parent_run_id)
;
CREATE INDEX ix_runs_review_deadline ON runs (review_deadline)
;
CREATE INDEX ix_runs_status ON runs (status)
;
CREATE INDEX ix_runs_status_review_deadline ON runs (status, review_deadline)
;
CREATE INDEX ix_runs_workflow ON runs (workflow)
;
CREATE INDEX ix_runs_workflow_id ON runs (workflow_id)
;
CREATE INDEX ix_step_records_run_step_started ON step_records (run_pk, step_id, started_at)
;
CREATE INDEX ix_workflows_name ON workflows (name)
;
