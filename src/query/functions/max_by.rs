//! Spark's `max_by(value, ordering)` and `min_by(value, ordering)`: the
//! value on the row with the largest (smallest) ordering. Rows whose
//! ordering is NULL are skipped; the value itself may be NULL.

use std::cmp::Ordering;

use deltalake::arrow::array::ArrayRef;
use deltalake::arrow::datatypes::{DataType, Field, FieldRef};
use deltalake::datafusion::common::{ScalarValue, exec_err};
use deltalake::datafusion::error::Result;
use deltalake::datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use deltalake::datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

/// `max_by` or `min_by`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct MaxBy {
    signature: Signature,
    /// `Greater` for max_by, `Less` for min_by.
    wins: Ordering,
}

impl MaxBy {
    pub(super) fn largest() -> Self {
        MaxBy {
            signature: Signature::any(2, Volatility::Immutable),
            wins: Ordering::Greater,
        }
    }

    pub(super) fn smallest() -> Self {
        MaxBy {
            wins: Ordering::Less,
            ..Self::largest()
        }
    }
}

impl AggregateUDFImpl for MaxBy {
    fn name(&self) -> &str {
        match self.wins {
            Ordering::Less => "min_by",
            _ => "max_by",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types.first() {
            Some(t) => Ok(t.clone()),
            None => exec_err!("{} takes (value, ordering)", self.name()),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let [value, ordering] = args.input_fields else {
            return exec_err!("{} takes (value, ordering)", self.name());
        };
        Ok(vec![
            Field::new("value", value.data_type().clone(), true).into(),
            Field::new("ordering", ordering.data_type().clone(), true).into(),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(BestRow {
            wins: self.wins,
            value_type: args.return_field.data_type().clone(),
            ordering_type: args
                .expr_fields
                .get(1)
                .map_or(DataType::Null, |f| f.data_type().clone()),
            best: None,
        }))
    }
}

#[derive(Debug)]
struct BestRow {
    wins: Ordering,
    value_type: DataType,
    ordering_type: DataType,
    /// (value, ordering) of the best row so far.
    best: Option<(ScalarValue, ScalarValue)>,
}

impl BestRow {
    fn offer(&mut self, values: &ArrayRef, orderings: &ArrayRef) -> Result<()> {
        for row in 0..orderings.len() {
            if orderings.is_null(row) {
                continue;
            }
            let ordering = ScalarValue::try_from_array(orderings, row)?;
            let better = match &self.best {
                None => true,
                Some((_, best)) => ordering.partial_cmp(best) == Some(self.wins),
            };
            if better {
                self.best = Some((ScalarValue::try_from_array(values, row)?, ordering));
            }
        }
        Ok(())
    }
}

impl Accumulator for BestRow {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        match values {
            [value, ordering] => self.offer(value, ordering),
            _ => exec_err!("max_by/min_by take (value, ordering)"),
        }
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(match &self.best {
            Some((value, ordering)) => vec![value.clone(), ordering.clone()],
            None => vec![
                ScalarValue::try_from(&self.value_type)?,
                ScalarValue::try_from(&self.ordering_type)?,
            ],
        })
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        match &self.best {
            Some((value, _)) => Ok(value.clone()),
            None => ScalarValue::try_from(&self.value_type),
        }
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.best.as_ref().map_or(0, |(v, o)| v.size() + o.size())
    }
}

#[cfg(test)]
mod tests {
    use crate::query::SparkSession;
    use crate::query::functions::QueryClock;
    use deltalake::arrow::util::display::array_value_to_string;

    #[tokio::test]
    async fn picks_the_value_of_the_extreme_ordering_per_group() {
        let session =
            SparkSession::new(QueryClock::new(chrono::Utc::now(), "UTC".parse().unwrap())).unwrap();
        let batches = session
            .sql(
                "SELECT k, max_by(v, o), min_by(v, o) FROM (VALUES \
                 ('a', 'first', 1), ('a', 'last', 3), ('a', NULL, 2), ('a', 'unordered', NULL), \
                 ('b', NULL, 5), ('b', 'low', 4), ('c', 'only', NULL)) AS t(k, v, o) \
                 GROUP BY k ORDER BY k",
            )
            .await
            .unwrap();
        let rows: Vec<Vec<String>> = batches
            .iter()
            .flat_map(|b| {
                (0..b.num_rows()).map(move |r| {
                    b.columns()
                        .iter()
                        .map(|c| array_value_to_string(c, r).unwrap())
                        .collect()
                })
            })
            .collect();
        assert_eq!(
            rows,
            [["a", "last", "first"], ["b", "", "low"], ["c", "", ""],]
        );
    }
}
